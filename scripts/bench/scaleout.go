package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/tenant"
)

// -scenario scaleout (issue 26): does a cluster's write capacity grow with
// Raft groups whose leaders spread over the nodes? Three nodes, each in a
// cgroup of its own capped at -scaleout-cap of a core (the three caps and
// the load generator fit in this machine's two cores), run twice in one
// sitting: with --raft-groups 1 and with --raft-groups 3. Three tenants
// (one per group of the second run) each
//
//	push   batched pushes, 100 items a request, o.conns/3 workers a tenant;
//	eo     the seed's exactly-once pattern, max(8, o.conns/3) workers a tenant: pop one
//	       order, read its marker, commit ack + marker in one transaction,
//
// with workers spread over the three nodes (followers forward). Every node
// follows every group, so the gain has a ceiling: with L the leader's and
// F a follower's CPU per message in the one-group run, three groups give
// at most 3L/(L+2F). The report gives both rates, their ratio, the ceiling,
// each node's CPU share of its cap, the cgroups' throttled time, and the
// load generator's own CPU. It refuses to print a ratio unless it read the
// caps back from the cgroup files with every node in its group.
func runScaleout(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	if o.scaleCap <= 0 || 3*o.scaleCap >= 2 {
		fmt.Fprintf(stderr, "bench: -scaleout-cap %.2f: the three caps must leave the load generator part of the 2 cores\n", o.scaleCap)
		return 2
	}
	work, err := os.MkdirTemp("", "qn-scaleout.")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(work)
	bin, err := nodeproc.Binary(ctx, o.bin, work)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	var runs []*scaleRun
	for _, groups := range []int{1, 3} {
		fmt.Fprintf(stderr, "bench: scaleout with --raft-groups %d ...\n", groups)
		r, err := scaleoutOnce(ctx, o, bin, work, groups, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: scaleout --raft-groups %d: %v\n", groups, err)
			return 1
		}
		runs = append(runs, r)
	}
	return reportScaleout(stdout, o, runs[0], runs[1])
}

// scaleRun is one configuration's measurements.
type scaleRun struct {
	groups  int
	leaders []string // group → leader id, as the phases began
	nodes   []string // node ids, in the order of cpu
	push    scalePhase
	eo      scalePhase
	capsOK  error
}

type scalePhase struct {
	msgs      int64
	errors    int64
	secs      float64
	cpu       []time.Duration // per node
	throttled []int64         // per node, µs
	load      time.Duration   // the load generator's own CPU
}

func (p scalePhase) rate() float64 { return float64(p.msgs) / p.secs }

// scaleTenants are the three tenants: the default (group 0) and one of
// each other group of three.
func scaleTenants() []string {
	names := []string{tenant.Default}
	for g := 1; g < 3; g++ {
		for i := 0; ; i++ {
			if name := fmt.Sprintf("shop-%d", i); cluster.GroupOf(name, 3) == g {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

func scaleoutOnce(ctx context.Context, o *options, bin, work string, groups int, stderr io.Writer) (*scaleRun, error) {
	flags := []string{"--raft-groups", fmt.Sprint(groups), "--trust-tenant-header", "--kv-read-rate", "0",
		"--default-subscription-mode", "all"}
	if o.profileDir != "" {
		flags = append(flags, "--pprof")
	}
	c, err := nodeproc.StartCluster(ctx, nodeproc.ClusterConfig{Bin: bin, Dir: fmt.Sprintf("%s/g%d", work, groups), Nodes: 3,
		Flags: append(flags, strings.Fields(o.nodeArgs)...),
		Logf:  func(f string, a ...any) { fmt.Fprintf(stderr, "bench: "+f+"\n", a...) }})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, n := range c.Running() {
			n.Terminate(15 * time.Second)
		}
		c.Stop()
	}()
	r := &scaleRun{groups: groups}
	var pids []int
	var cgs []*cpuCgroup
	for i, n := range c.Nodes() {
		cg, err := newCPUCgroup(fmt.Sprintf("qn-scaleout-%s-g%d-n%d", runID, groups, i+1), o.scaleCap)
		if err != nil {
			return nil, err
		}
		defer cg.remove()
		if err := cg.add(n.PID()); err != nil {
			return nil, err
		}
		r.nodes, pids, cgs = append(r.nodes, n.ID()), append(pids, n.PID()), append(cgs, cg)
	}
	for i, cg := range cgs {
		if err := cg.inForce(pids[i]); err != nil {
			r.capsOK = err
		}
	}
	urls := c.URLs()
	leaders, err := awaitSpread(ctx, urls[0], groups, 90*time.Second)
	if err != nil {
		return nil, err
	}
	r.leaders = leaders
	tenants := scaleTenants()
	// Each client is given every node and sends its tenant's calls to the
	// leader of its tenant's group (the Go client's leader routing, which
	// /health's tenant object feeds); -scaleout-routed=false spreads them over
	// the nodes instead (worker w → node w mod 3, followers forward).
	clients := map[string]*queen.Client{} // tenant + node
	var clientsMu sync.Mutex
	client := func(t string, node int) *queen.Client {
		clientsMu.Lock()
		defer clientsMu.Unlock()
		k := fmt.Sprint(t, node)
		if cl := clients[k]; cl != nil {
			return cl
		}
		target, routing := urls[node], false
		if o.scaleRouted {
			target, routing = strings.Join(urls, ","), true
		}
		cl, err := queen.New(target, queen.WithTenant(t), queen.WithLeaderRouting(routing))
		if err != nil {
			panic(err) // a URL nodeproc made
		}
		clients[k] = cl
		return cl
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	pool := newPayloadPool(o.payload)
	measure := func(phase string, p *scalePhase, workers int, step func(w int) (int64, error)) {
		profiled := profileNodes(ctx, o.profileDir, fmt.Sprintf("g%d-%s", groups, phase), r.nodes, urls, o.duration)
		defer func() {
			if err := profiled(); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
			}
		}()
		cpu := make([]*cpuMeter, len(pids))
		thr := make([]int64, len(cgs))
		for i := range pids {
			cpu[i], thr[i] = startCPU(pids[i:i+1]), cgs[i].throttledUs()
		}
		self := startCPU([]int{os.Getpid()})
		var msgs, errs atomic.Int64
		secs := runFor(ctx, workers, o.duration, func(w int) bool {
			n, err := step(w)
			if err != nil {
				errs.Add(1)
				return pause(ctx, 20*time.Millisecond)
			}
			msgs.Add(n)
			return true
		})
		p.msgs, p.errors, p.secs, p.load = msgs.Load(), errs.Load(), secs.Seconds(), self.used()
		for i := range pids {
			p.cpu = append(p.cpu, cpu[i].used())
			p.throttled = append(p.throttled, cgs[i].throttledUs()-thr[i])
		}
	}
	perTenant := max(o.conns/len(tenants), 1)
	measure("push", &r.push, perTenant*len(tenants), func(w int) (int64, error) {
		t := tenants[w%len(tenants)]
		msgs := make([]queen.Msg, o.batch)
		for i := range msgs {
			msgs[i] = queen.Msg{Data: json.RawMessage(`{"d":"` + pool[(w+i)%len(pool)] + `"}`), Partition: fmt.Sprint("p", (w+i)%16)}
		}
		res, err := client(t, w%len(urls)).Queue("scale-push").Push(ctx, msgs...)
		return int64(len(res)), err
	})
	// the orders, then the exactly-once consumers
	orders := min(o.orders, 20000)
	for _, t := range tenants {
		if err := prefillOrders(ctx, client(t, 0), orders, pool); err != nil {
			return nil, fmt.Errorf("prefill %s: %w", t, err)
		}
	}
	eoPerTenant := max(8, perTenant)
	measure("eo", &r.eo, eoPerTenant*len(tenants), func(w int) (int64, error) {
		t := tenants[w%len(tenants)]
		cl := client(t, (w/len(tenants))%len(urls))
		ms, err := cl.Queue("scale-orders").Pop(ctx, queen.PopOptions{Batch: 1, Wait: time.Second})
		if err != nil || len(ms) == 0 {
			return 0, err
		}
		m := ms[0]
		mark, err := cl.KV().Get(ctx, "charges", m.TransactionID)
		if err != nil {
			return 0, err
		}
		if mark.Found {
			return 0, cl.Ack(ctx, m) // charged before: settle only
		}
		res, err := cl.Transaction().Ack(m).Once("charges", m.TransactionID, time.Hour).Commit(ctx)
		if err != nil || !res.Committed {
			return 0, fmt.Errorf("commit: %v %+v", err, res)
		}
		return 1, nil
	})
	return r, nil
}

func prefillOrders(ctx context.Context, cl *queen.Client, n int, pool payloadPool) error {
	for sent := 0; sent < n; {
		k := min(500, n-sent)
		msgs := make([]queen.Msg, k)
		for i := range msgs {
			msgs[i] = queen.Msg{Data: json.RawMessage(`{"d":"` + pool[i%len(pool)] + `"}`), TransactionID: fmt.Sprint("order-", sent+i),
				Partition: fmt.Sprint("p", i%16)}
		}
		if _, err := cl.Queue("scale-orders").Push(ctx, msgs...); err != nil {
			return err
		}
		sent += k
	}
	return nil
}

// awaitSpread waits until every group has a leader and, with several
// groups, no node leads two (the leader balancer has run); it returns the
// leaders by group.
func awaitSpread(ctx context.Context, url string, groups int, limit time.Duration) ([]string, error) {
	deadline := time.Now().Add(limit)
	var last []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var h struct {
			Groups []cluster.GroupStatus `json:"groups"`
		}
		if err := getJSON(ctx, url+"/health", &h); err == nil && len(h.Groups) == groups {
			last = last[:0]
			seen := map[string]bool{}
			ok := true
			for _, g := range h.Groups {
				last = append(last, g.Leader)
				ok = ok && g.Leader != "" && !seen[g.Leader]
				seen[g.Leader] = true
			}
			if ok {
				return last, nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil, fmt.Errorf("the groups' leaders did not spread within %v: %v", limit, last)
}

func reportScaleout(w io.Writer, o *options, one, three *scaleRun) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	shape := "each client sends to its tenant's group leader (leader routing)"
	if !o.scaleRouted {
		shape = "workers spread over the nodes, followers forward"
	}
	fmt.Fprintf(w, "scaleout: 3 nodes, each capped at %.2f core (cgroup v1 cpu, period %d ms); the load generator is not capped; %s\n",
		o.scaleCap, cgroupPeriodUs/1000, shape)
	fmt.Fprintln(tw, "groups\tphase\tmsgs\tsecs\tmsg/s\terrors\tnode CPU share of its cap (leader of)\tthrottled ms\tload gen cores\t")
	for _, r := range []*scaleRun{one, three} {
		for _, ph := range []struct {
			name string
			p    scalePhase
		}{{"push", r.push}, {"eo", r.eo}} {
			var shares, thr []string
			for i, id := range r.nodes {
				var led []string
				for g, l := range r.leaders {
					if l == id {
						led = append(led, fmt.Sprint(g))
					}
				}
				shares = append(shares, fmt.Sprintf("%s %.0f%% (%s)", id, 100*ph.p.cpu[i].Seconds()/(ph.p.secs*o.scaleCap), strings.Join(led, ",")))
				thr = append(thr, fmt.Sprint(ph.p.throttled[i]/1000))
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.0f\t%d\t%s\t%s\t%.2f\t\n", r.groups, ph.name, ph.p.msgs, ph.p.secs, ph.p.rate(), ph.p.errors,
				strings.Join(shares, "  "), strings.Join(thr, " "), ph.p.load.Seconds()/ph.p.secs)
		}
	}
	tw.Flush()
	for _, r := range []*scaleRun{one, three} {
		if r.capsOK != nil {
			fmt.Fprintf(w, "scaleout: NO RATIO: the caps are not in force (%v)\n", r.capsOK)
			return 1
		}
	}
	failed := false
	for _, ph := range []string{"push", "eo"} {
		p1, p3 := one.push, three.push
		if ph == "eo" {
			p1, p3 = one.eo, three.eo
		}
		lead := 0
		for i, id := range one.nodes {
			if id == one.leaders[0] {
				lead = i
			}
		}
		var follow time.Duration
		for i := range one.nodes {
			if i != lead {
				follow += p1.cpu[i]
			}
		}
		L := p1.cpu[lead].Seconds() / float64(p1.msgs) * 1e6
		F := follow.Seconds() / 2 / float64(p1.msgs) * 1e6
		ceiling := 3 * L / (L + 2*F)
		ratio := p3.rate() / p1.rate()
		fmt.Fprintf(w, "scaleout %s: L %.1f µs/msg, F %.1f µs/msg (one group); ceiling 3L/(L+2F) = %.2fx; measured %.0f → %.0f msg/s = %.2fx = %.0f%% of the ceiling\n",
			ph, L, F, ceiling, p1.rate(), p3.rate(), ratio, 100*ratio/ceiling)
		if p1.errors+p3.errors > 0 {
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}
