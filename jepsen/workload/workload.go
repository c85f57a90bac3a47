// Package workload holds the fault tests' workloads. Each drives clients
// while faults happen, records a history, finishes its work once the faults
// are healed, and checks the history against the broker's guarantees.
package workload

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/harness"
	"github.com/queen-node/queen-node/jepsen/history"
)

// Env is what a workload gets to work with.
type Env struct {
	Cluster *harness.Cluster
	Rec     *history.Recorder
	Clients int
	Seed    int64
	Logf    func(format string, args ...any)
	// Retention > 0: the queue workload's queue removes what every group
	// consumed after this long (completedRetentionSeconds).
	Retention time.Duration
	// Tenant is the tenant every client of this Env names ("" = the
	// default tenant): a run with several tenants gives each its own Env,
	// workloads and checkers, over the same queue and key names.
	Tenant string
	next   int
}

// Client makes a recording client over the current nodes.
func (e *Env) Client() *client.Client {
	e.next++
	c := client.New(e.next, e.Cluster.URLs(), e.Rec)
	c.Tenant = e.Tenant
	return c
}

// Rand is a seeded source for one goroutine.
func (e *Env) Rand(salt int) *rand.Rand { return rand.New(rand.NewSource(e.Seed*7919 + int64(salt))) }

// Result is a workload's verdict.
type Result struct {
	Ops          int
	Lost         int
	Duplicated   int
	Linearizable *bool // nil when the workload checks no linearizability
	Violations   []string
	// Files to keep in the report on failure (name → content).
	Files map[string][]byte
}

// OK reports whether nothing was violated.
func (r Result) OK() bool {
	return len(r.Violations) == 0 && r.Lost == 0 && r.Duplicated == 0 && (r.Linearizable == nil || *r.Linearizable)
}

func (r *Result) violate(format string, args ...any) {
	if len(r.Violations) < 50 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	} else if len(r.Violations) == 50 {
		r.Violations = append(r.Violations, "... more")
	}
}

// Workload is one kind of load with its checker.
type Workload interface {
	Name() string
	Setup(ctx context.Context, env *Env) error
	// Run generates load until ctx ends.
	Run(ctx context.Context, env *Env)
	// Finish completes the work after the faults are healed (drains queues,
	// waits for timers), within ctx.
	Finish(ctx context.Context, env *Env) error
	Check(env *Env) Result
}

// ByName returns the workloads named in a comma list ("all" = every one).
func ByName(names []string) ([]Workload, error) {
	all := map[string]func() Workload{
		"queue":   func() Workload { return newQueue() },
		"kv":      func() Workload { return newKV() },
		"timers":  func() Workload { return newTimers() },
		"ledger":  func() Workload { return newLedger() },
		"locks":   func() Workload { return newLocks() },
		"streams": func() Workload { return newStreams() },
		"kafka":   func() Workload { return newKafka() },
	}
	var out []Workload
	for _, n := range names {
		if n == "all" {
			keys := make([]string, 0, len(all))
			for k := range all {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = append(out, all[k]())
			}
			continue
		}
		f, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown workload %q (queue, kv, timers, ledger, locks, streams, kafka, all)", n)
		}
		out = append(out, f())
	}
	return out, nil
}

// Names lists workload names.
func Names(ws []Workload) string {
	var s []string
	for _, w := range ws {
		s = append(s, w.Name())
	}
	return strings.Join(s, ",")
}
