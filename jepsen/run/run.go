// Package run is the fault test itself: start a cluster, drive workloads,
// inject faults with a health check before and after each, heal, let the
// workloads finish, check their histories, and on failure write a report.
package run

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/jepsen/failpoint"
	"github.com/queen-node/queen-node/jepsen/harness"
	"github.com/queen-node/queen-node/jepsen/history"
	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/jepsen/netns"
	"github.com/queen-node/queen-node/jepsen/workload"
)

// Options configure a run.
type Options struct {
	Nodes     int
	Duration  time.Duration
	Faults    []string
	Workloads []string
	Bin       string
	Dir       string // work dir (data, logs); the report goes to Dir/report on failure
	Seed      int64
	NetNS     string // auto | on | off
	// LossyFS puts the data dirs on lossyfs mounts, so that the power-loss
	// faults can drop unsynced writes: auto (on when a powerloss fault is
	// asked for and FUSE works here) | on | off.
	LossyFS string
	// Retention, when set, gives the queue workload's queue a
	// completedRetentionSeconds of it (with retentionEnabled) and the nodes
	// 500 ms retention sweeps: consumed messages are removed while faults
	// happen, and the checker's rules still hold (nothing acknowledged and
	// unconsumed by a group goes; nothing removed comes back).
	Retention time.Duration
	// MinFaults keeps the load and the faults going past Duration until
	// this many faults were injected (a long campaign's floor), for at most
	// Duration again plus 30 minutes.
	MinFaults int
	// Groups runs the nodes with --raft-groups Groups; Tenants > 1 runs the
	// workloads once per tenant (the default and Tenants-1 others, spread
	// over the groups), each with its own clients, history and checkers,
	// over the same queue and key names: a tenant that saw another's
	// messages, markers or locks fails its checker.
	Groups, Tenants int
	Logf            func(format string, args ...any)
}

// Summary is the run's outcome.
type Summary struct {
	OK           bool
	Ops          int
	Faults       int
	Lost         int
	Duplicated   int
	Linearizable bool
	Violations   []string
	Report       string // report folder, on failure
	Skipped      []string
}

// Line is the one-line verdict.
func (s Summary) Line() string {
	verdict := "ok"
	if !s.OK {
		verdict = "FAIL"
	}
	return fmt.Sprintf("jepsen: %s ops=%d faults=%d lost=%d duplicated=%d linearizable=%v",
		verdict, s.Ops, s.Faults, s.Lost, s.Duplicated, s.Linearizable)
}

// Run runs one fault test.
func Run(ctx context.Context, o Options) (Summary, error) {
	var sum Summary
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano() % 1e9
	}
	o.Logf("seed %d", o.Seed)
	faults, err := failpoint.ByName(o.Faults)
	if err != nil {
		return sum, err
	}
	if _, err := workload.ByName(o.Workloads); err != nil {
		return sum, err
	}
	useNS := false
	switch o.NetNS {
	case "on":
		if ok, why := netns.Available(); !ok {
			return sum, fmt.Errorf("network namespaces unavailable: %s", why)
		}
		useNS = true
	case "auto", "":
		useNS, _ = netns.Available()
	}
	useLossy := false
	switch o.LossyFS {
	case "on":
		if ok, why := lossyfs.Available(); !ok {
			return sum, fmt.Errorf("lossyfs unavailable: %s", why)
		}
		useLossy = true
	case "auto", "":
		if failpoint.NeedsLossyFS(o.Faults) {
			var why string
			if useLossy, why = lossyfs.Available(); !useLossy {
				o.Logf("lossyfs is not available here (%s): no power-loss, slow-disk or disk-full faults", why)
			}
		}
	case "off":
	default:
		return sum, fmt.Errorf("lossyfs: %q is not auto, on or off", o.LossyFS)
	}
	if useLossy {
		o.Logf("data dirs on lossyfs: unsynced writes are lost on a power loss")
	}
	var extra []string
	if o.Retention > 0 {
		extra = append(extra, "--retention-interval-ms", "500")
	}
	if o.Groups > 1 || o.Tenants > 1 {
		extra = append(extra, "--raft-groups", fmt.Sprint(max(o.Groups, 1)), "--trust-tenant-header")
	}
	c, err := harness.Start(ctx, harness.Options{Nodes: o.Nodes, Bin: o.Bin, Dir: o.Dir, NetNS: useNS, LossyFS: useLossy, Logf: o.Logf, Extra: extra})
	if err != nil {
		return sum, err
	}
	defer c.Stop()
	var usable []failpoint.Fault
	for _, f := range faults {
		if f.Available(c) {
			usable = append(usable, f)
		} else {
			sum.Skipped = append(sum.Skipped, f.Name())
			why := "no network namespaces"
			if failpoint.NeedsLossyFS([]string{f.Name()}) {
				why = "the data dirs are not on lossyfs"
			}
			o.Logf("fault %s is not available here (%s)", f.Name(), why)
		}
	}
	type job struct {
		env *workload.Env
		w   workload.Workload
	}
	var jobs []job
	var envs []*workload.Env // every tenant's, the default's first
	for i, name := range tenantNames(o.Tenants, o.Groups) {
		e := &workload.Env{Cluster: c, Rec: history.New(), Seed: o.Seed + int64(i), Logf: o.Logf, Retention: o.Retention, Tenant: name}
		envs = append(envs, e)
		wls, _ := workload.ByName(o.Workloads)
		for _, w := range wls {
			if name != "" && w.Name() == "kafka" {
				// A Kafka client names its tenant only by its token's claim,
				// and these nodes run without JWT: every Kafka connection is
				// the default tenant's (e2e/kafka_tenants_test.go covers the
				// others).
				continue
			}
			if err := w.Setup(ctx, e); err != nil {
				return sum, fmt.Errorf("setup %s%s: %w", w.Name(), tenantSuffix(name), err)
			}
			jobs = append(jobs, job{e, w})
		}
	}

	// Load and faults for the duration (and until MinFaults).
	loadCtx, stopLoad := context.WithCancel(ctx)
	end, hardEnd := time.Now().Add(o.Duration), time.Now().Add(2*o.Duration+30*time.Minute)
	enough := func(faults int) bool {
		now := time.Now()
		return (now.After(end) && faults >= o.MinFaults) || now.After(hardEnd)
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); j.w.Run(loadCtx, j.env) }()
	}
	var faultLog []string
	if len(usable) > 0 {
		sum.Faults, faultLog, err = nemesis(loadCtx, c, usable, rand.New(rand.NewSource(o.Seed)), o.Logf, enough)
	} else {
		select {
		case <-time.After(o.Duration):
		case <-ctx.Done():
		}
	}
	stopLoad()
	wg.Wait()
	if err != nil {
		sum.Violations = append(sum.Violations, "nemesis: "+err.Error())
	}

	// Heal everything, then let the workloads finish.
	healCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if c.Net() != nil {
		c.Net().Heal()
	}
	for _, n := range c.Nodes() {
		n.Resume()
		c.Restart(n)
	}
	if err := c.Healthy(healCtx, 60*time.Second); err != nil {
		sum.Violations = append(sum.Violations, "cluster did not recover after the faults healed: "+err.Error())
	}
	for _, j := range jobs {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := j.w.Finish(fctx, j.env); err != nil {
			sum.Violations = append(sum.Violations, fmt.Sprintf("%s%s: finishing: %v", j.w.Name(), tenantSuffix(j.env.Tenant), err))
		}
		fcancel()
	}
	sum.Linearizable = true
	files := map[string][]byte{}
	for _, j := range jobs {
		w, name := j.w, j.w.Name()+tenantSuffix(j.env.Tenant)
		r := w.Check(j.env)
		sum.Ops += r.Ops
		sum.Lost += r.Lost
		sum.Duplicated += r.Duplicated
		if r.Linearizable != nil && !*r.Linearizable {
			sum.Linearizable = false
		}
		for _, v := range r.Violations {
			sum.Violations = append(sum.Violations, name+": "+v)
		}
		for file, b := range r.Files {
			files[name+"-"+file] = b
		}
	}
	sum.OK = len(sum.Violations) == 0 && sum.Lost == 0 && sum.Duplicated == 0 && sum.Linearizable
	if !sum.OK {
		sum.Report = filepath.Join(o.Dir, "report")
		writeReport(sum, envs, c, faultLog, files, o)
	}
	return sum, nil
}

// nemesis injects faults until ctx ends or enough says so: a health check,
// a fault held for a while, its heal, another health check.
func nemesis(ctx context.Context, c *harness.Cluster, faults []failpoint.Fault, rng *rand.Rand, logf func(string, ...any),
	enough func(faults int) bool) (int, []string, error) {
	var log []string
	count := 0
	for {
		if enough(count) {
			return count, log, nil
		}
		select {
		case <-ctx.Done():
			return count, log, nil
		case <-time.After(time.Duration(500+rng.Intn(1500)) * time.Millisecond):
		}
		hctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		if err := c.Healthy(hctx, 40*time.Second); err != nil {
			cancel()
			return count, log, fmt.Errorf("unhealthy before a fault: %w", err)
		}
		f := faults[rng.Intn(len(faults))]
		heal, what, err := f.Inject(hctx, c, rng)
		if err != nil {
			cancel()
			logf("fault %s could not be injected: %v", f.Name(), err)
			continue
		}
		count++
		entry := fmt.Sprintf("%s %s", time.Now().Format("15:04:05.000"), what)
		log = append(log, entry)
		logf("fault: %s", what)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1000+rng.Intn(3000)) * time.Millisecond):
		}
		if err := heal(hctx); err != nil {
			cancel()
			return count, log, fmt.Errorf("healing %s: %w", what, err)
		}
		log = append(log, time.Now().Format("15:04:05.000")+" healed")
		if err := c.Healthy(hctx, 40*time.Second); err != nil {
			cancel()
			return count, log, fmt.Errorf("unhealthy after healing %q: %w", what, err)
		}
		cancel()
	}
}

func writeReport(sum Summary, envs []*workload.Env, c *harness.Cluster, faults []string, files map[string][]byte, o Options) {
	dir := sum.Report
	os.MkdirAll(dir, 0o755)
	for _, e := range envs { // the default tenant's history.jsonl, another's history-<tenant>.jsonl
		name := "history.jsonl"
		if e.Tenant != "" {
			name = "history-" + e.Tenant + ".jsonl"
		}
		e.Rec.WriteFile(filepath.Join(dir, name))
	}
	os.WriteFile(filepath.Join(dir, "faults.txt"), []byte(strings.Join(faults, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "violations.txt"), []byte(strings.Join(sum.Violations, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(fmt.Sprintf("%s\nseed %d\n", sum.Line(), o.Seed)), 0o644)
	for name, b := range files {
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	// Node logs and data dirs stay where they are (o.Dir/nX, o.Dir/nX.log);
	// the report names them.
	var nodes []string
	for _, n := range c.Nodes() {
		line := fmt.Sprintf("%s: data %s, log %s", n.ID(), n.DataDir(), n.LogPath())
		if n.Backing != "" {
			line += fmt.Sprintf(" (data on lossyfs: after the run it is in %s; last boot id %s)", n.Backing, n.BootID())
		}
		nodes = append(nodes, line)
	}
	os.WriteFile(filepath.Join(dir, "nodes.txt"), []byte(strings.Join(nodes, "\n")+"\n"), 0o644)
}

// tenantNames are a run's tenants: the default ("") and n-1 others, the
// i-th of them in group i mod groups (cluster.GroupOf), so that with two
// tenants on two groups each group holds one.
func tenantNames(n, groups int) []string {
	names := []string{""}
	for i := 1; i < n; i++ {
		for k := 0; ; k++ {
			if name := fmt.Sprintf("jepsen-%d", k); cluster.GroupOf(name, max(groups, 1)) == i%max(groups, 1) && !slices.Contains(names, name) {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

func tenantSuffix(name string) string {
	if name == "" {
		return ""
	}
	return "[" + name + "]"
}
