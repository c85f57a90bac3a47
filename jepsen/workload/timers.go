package workload

import "context"

// timersWL: transactions schedule, reschedule and cancel timers while
// leaders die; every timer pending at the end fires exactly once, never
// early, and a cancelled one never fires.
type timersWL struct{}

func newTimers() *timersWL                                     { return &timersWL{} }
func (t *timersWL) Name() string                               { return "timers" }
func (t *timersWL) Setup(ctx context.Context, env *Env) error  { return nil }
func (t *timersWL) Run(ctx context.Context, env *Env)          {}
func (t *timersWL) Finish(ctx context.Context, env *Env) error { return nil }
func (t *timersWL) Check(env *Env) Result {
	return Result{Violations: []string{"timers workload not written yet"}}
}
