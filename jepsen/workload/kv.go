package workload

import "context"

// kvWL: single-key registers under get, put, putIfAbsent and cas, checked
// for linearizability with porcupine (a timed-out write is indeterminate).
type kvWL struct{}

func newKV() *kvWL                                         { return &kvWL{} }
func (k *kvWL) Name() string                               { return "kv" }
func (k *kvWL) Setup(ctx context.Context, env *Env) error  { return nil }
func (k *kvWL) Run(ctx context.Context, env *Env)          {}
func (k *kvWL) Finish(ctx context.Context, env *Env) error { return nil }
func (k *kvWL) Check(env *Env) Result {
	return Result{Violations: []string{"kv workload not written yet"}}
}
