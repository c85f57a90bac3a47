package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clusterLoad runs pushers against a cluster. Worker w pushes through node
// w%3 while it is up and through the next one when it is not, or when a
// request fails. Every item has a unique transactionId
// "<prefix>-w<w>-<i>-<j>". A request that does not come back 201 leaves its
// items in doubt; the worker retries the very same items (same partitions,
// same transactionIds) until an answer says queued or duplicate, and only
// then pushes its next batch, so each worker's items stay in push order and
// dedup keeps every item single. The ledger (durability_test.go) ends with
// every answered item in acked, and only items still unsettled at the end in
// maybe.
type clusterLoad struct {
	c       *testCluster
	queue   string
	prefix  string
	workers int
	parts   int
	maxSize int // items per request: 1 or maxSize, at random (1 if < 2)
	led     *ledger
	seed    uint64

	killAt     atomic.Int64 // UnixNano when the test killed the leader (0: not yet)
	firstAfter atomic.Int64 // UnixNano of the first 201 to a push sent after killAt
	stop       atomic.Bool
	stopAt     atomic.Int64
	abortFlag  atomic.Bool // give up at once, even on batches in doubt
	wg         sync.WaitGroup

	mu      sync.Mutex
	answers map[string]int // request outcomes by kind, for the log
	// batches first left in doubt, and how their retries settled
	inDoubt, settledQueued, settledDuplicate, unsettled int
}

func (cl *clusterLoad) count(kind string) {
	cl.mu.Lock()
	cl.answers[kind]++
	cl.mu.Unlock()
}

func (cl *clusterLoad) start() {
	cl.answers = map[string]int{}
	for w := 0; w < cl.workers; w++ {
		cl.wg.Add(1)
		go cl.worker(w)
	}
}

// finish stops new batches, lets every worker settle the batch it holds,
// and waits for them.
func (cl *clusterLoad) finish() {
	cl.stopAt.Store(time.Now().UnixNano())
	cl.stop.Store(true)
	cl.wg.Wait()
}

// abort stops the workers at once (a failing test) and waits for them.
func (cl *clusterLoad) abort() {
	cl.abortFlag.Store(true)
	cl.finish()
}

// pick is the node worker home uses after k failures: the first node that
// is up, starting at home+k.
func (cl *clusterLoad) pick(home, k int) *node {
	ns := cl.c.nodes
	for i := 0; i < len(ns); i++ {
		if n := ns[(home+k+i)%len(ns)]; n.Running() {
			return n
		}
	}
	return ns[home%len(ns)]
}

func (cl *clusterLoad) worker(w int) {
	defer cl.wg.Done()
	rng := rand.New(rand.NewPCG(cl.seed, uint64(w)))
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; i < 1_000_000 && !cl.stop.Load() && time.Now().Before(deadline); i++ {
		size := 1
		if cl.maxSize > 1 && rng.IntN(2) == 1 {
			size = cl.maxSize
		}
		items := make([]pushItem, size)
		for j := range items {
			items[j] = pushItem{
				Queue: cl.queue, Partition: fmt.Sprintf("p%d", rng.IntN(cl.parts)),
				TransactionID: fmt.Sprintf("%s-w%d-%d-%d", cl.prefix, w, i, j),
				Payload:       map[string]any{"w": w, "i": i, "j": j},
			}
		}
		if !cl.pushUntilSettled(w, items) {
			return // left in doubt: pushing on would break this worker's order
		}
	}
}

// pushUntilSettled pushes items until an answer settles them. It gives up
// (items stay in doubt) 20 s after finish was called, or after 60 s.
func (cl *clusterLoad) pushUntilSettled(w int, items []pushItem) bool {
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		cl.led.fault("marshal: %v", err)
		return false
	}
	deadline := time.Now().Add(60 * time.Second)
	k := 0
	for attempt := 0; attempt < 2000; attempt++ {
		if time.Now().After(deadline) || cl.abortFlag.Load() {
			break
		}
		if sa := cl.stopAt.Load(); sa != 0 && attempt > 0 && time.Since(time.Unix(0, sa)) > 20*time.Second {
			break
		}
		n := cl.pick(w%len(cl.c.nodes), k)
		sent := time.Now()
		r, err := n.send(10*time.Second, "POST", "/api/v1/push", body, nil)
		switch {
		case err != nil:
			cl.count("transport error")
		case r.Status == http.StatusCreated:
			if cl.settle(items, r, attempt > 0) {
				cl.count("201")
				if ka := cl.killAt.Load(); ka != 0 && sent.UnixNano() >= ka {
					cl.firstAfter.CompareAndSwap(0, time.Now().UnixNano())
				}
				return true
			}
			cl.count("201 unreadable")
		case r.Status >= 500:
			cl.count(fmt.Sprintf("%d %s", r.Status, errCode(r)))
		default:
			cl.count(fmt.Sprintf("%d", r.Status))
			cl.led.fault("push of %d items through %s answered %s", len(items), n.ID(), r)
		}
		if attempt == 0 {
			cl.mu.Lock()
			cl.inDoubt++
			cl.mu.Unlock()
			cl.led.mu.Lock()
			for _, it := range items {
				cl.led.maybe[it.TransactionID] = it.Partition
			}
			cl.led.mu.Unlock()
		}
		k++
		time.Sleep(time.Duration(min(attempt+1, 5)) * 20 * time.Millisecond)
	}
	cl.mu.Lock()
	cl.unsettled++
	cl.mu.Unlock()
	return false
}

// settle files a 201. A retry may find its items already stored
// (duplicate, with the stored message's id); a first attempt may not.
func (cl *clusterLoad) settle(items []pushItem, r *response, retry bool) bool {
	var res []pushResult
	if err := json.Unmarshal(r.Body, &res); err != nil || len(res) != len(items) {
		cl.led.fault("push of %d items: 201 with an unreadable or short body (%v): %s", len(items), err, r)
		return false
	}
	dups := 0
	for i, it := range items {
		p := res[i]
		switch {
		case p.TransactionID != it.TransactionID:
			cl.led.fault("push result %d names transactionId %q, want %q", i, p.TransactionID, it.TransactionID)
			continue
		case p.Status == "duplicate" && retry:
			dups++
		case p.Status != "queued":
			cl.led.fault("transactionId %s (retry %v) answered status %q (error %s)", it.TransactionID, retry, p.Status, deref(p.Error))
			continue
		}
		cl.led.mu.Lock()
		if _, twice := cl.led.acked[it.TransactionID]; twice {
			cl.led.mu.Unlock()
			cl.led.fault("transactionId %s acknowledged twice", it.TransactionID)
			continue
		}
		delete(cl.led.maybe, it.TransactionID)
		cl.led.acked[it.TransactionID] = pushed{Partition: it.Partition, MessageID: p.MessageID}
		cl.led.order = append(cl.led.order, it.TransactionID)
		cl.led.mu.Unlock()
	}
	if retry {
		cl.mu.Lock()
		if dups > 0 {
			cl.settledDuplicate++
		} else {
			cl.settledQueued++
		}
		cl.mu.Unlock()
	}
	return true
}

func (cl *clusterLoad) summary() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	kinds := make([]string, 0, len(cl.answers))
	for k, v := range cl.answers {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("answers {%s}; batches in doubt %d, settled on retry as queued %d / duplicate %d, never settled %d",
		strings.Join(kinds, ", "), cl.inDoubt, cl.settledQueued, cl.settledDuplicate, cl.unsettled)
}

// reportFaults fails the test for every protocol violation the pushers saw.
func (cl *clusterLoad) reportFaults(t testing.TB) {
	t.Helper()
	cl.led.mu.Lock()
	defer cl.led.mu.Unlock()
	for _, f := range cl.led.faults {
		t.Errorf("push protocol violation: %s", f)
	}
	if cl.led.nFault > len(cl.led.faults) {
		t.Errorf("... %d push protocol violations in all", cl.led.nFault)
	}
}

// loadFor keeps the test waiting d while the load runs, failing it if a
// node that should be up died.
func (c *testCluster) loadFor(d time.Duration, up ...*node) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline) && i < 10000; i++ {
		for _, n := range up {
			n.requireRunning()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterFailoverUnderLoad: six pushers spread over the three nodes,
// kill -9 of the leader in the middle, three more seconds of load on the
// survivors, the dead node restarted (it must come back as a follower with
// its id and data), and then a fresh consumer group drains the queue
// through a follower: every push answered 201 is there exactly once, items
// whose answer was lost at most once (DESIGN.md invariant 5). It logs the
// election time (kill → a survivor's cluster view names a new leader) and
// the failover time (kill → first 201 to a push sent after the kill).
func TestClusterFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster load test; skipped with -short")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := startCluster(t, nodeOpts{})
	old := c.leader(10 * time.Second)
	const queue = "cluster-failover"
	led := newLedger()
	cl := &clusterLoad{c: c, queue: queue, prefix: "fo", workers: 6, parts: 6, maxSize: 10, led: led, seed: seed}
	loadStart := time.Now()
	cl.start()
	stopped := false
	defer func() {
		if !stopped {
			cl.abort()
		}
	}()

	// Load on all three nodes before the kill.
	if ok, detail := pollUntil(20*time.Second, 50*time.Millisecond, func() (bool, string) {
		n := led.ackedCount()
		return time.Since(loadStart) > 1500*time.Millisecond && n >= 200, fmt.Sprintf("%d items acked", n)
	}); !ok {
		t.Fatalf("load before the kill: %s after 20 s", detail)
	}
	beforeKill := led.ackedCount()

	killAt := time.Now()
	cl.killAt.Store(killAt.UnixNano())
	old.kill9()
	newID, election, err := c.awaitNewLeader(old.ID(), killAt, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := pollUntil(20*time.Second, 10*time.Millisecond, func() (bool, string) { return cl.firstAfter.Load() != 0, "" }); !ok {
		t.Fatalf("no push sent after the kill of %s was answered 201 within 20 s (%s)", old.ID(), cl.summary())
	}
	failover := time.Unix(0, cl.firstAfter.Load()).Sub(killAt)
	t.Logf("kill -9 of leader %s after %v of load (%d items acked): new leader %s visible after %v; first 201 through a survivor after %v",
		old.ID(), killAt.Sub(loadStart).Round(time.Millisecond), beforeKill, newID, election.Round(time.Millisecond), failover.Round(time.Millisecond))
	if failover > 10*time.Second {
		t.Errorf("failover took %v; want under 10 s", failover)
	}

	survivors := c.others(old)
	c.loadFor(3*time.Second, survivors...)

	// The dead node comes back with its id, addresses and data.
	off := old.LogSize()
	old.restart()
	rejoin := c.waitRejoined(old, 30*time.Second)
	t.Logf("node %s restarted and rejoined as a follower in %v", old.ID(), rejoin.Round(time.Millisecond))
	if strings.Contains(old.LogSince(off), "bootstrapped the cluster") {
		t.Errorf("the restarted node %s bootstrapped a cluster again; it had Raft state", old.ID())
	}
	c.loadFor(time.Second, c.nodes...)
	cl.finish()
	stopped = true
	t.Logf("load: %d items acked in %v; %s", led.ackedCount(), time.Since(loadStart).Round(time.Millisecond), cl.summary())
	cl.reportFaults(t)

	// Every replica ends with the same queue (stale reads: each its own).
	l := c.leader(10 * time.Second)
	want := l.api(t).queueTotals(queue)
	for _, n := range c.nodes {
		var got map[string]int
		ok, _ := pollUntil(10*time.Second, 50*time.Millisecond, func() (bool, string) {
			var d struct {
				Totals map[string]int `json:"totals"`
			}
			if err := n.getJSON("/api/v1/resources/queues/"+queue+"?consistency=stale", time.Second, &d); err != nil {
				return false, err.Error()
			}
			got = d.Totals
			return got["total"] == want["total"], ""
		})
		if !ok {
			t.Errorf("node %s's own state (stale read) has %v for %s; the leader %s has %v", n.ID(), got, queue, l.ID(), want)
		}
	}

	// Drain through a follower (the restarted node) with a fresh group.
	f := old
	if f == l {
		f = c.others(l)[0]
	}
	start := time.Now()
	got := drain(t, f.api(t), queue, "verify-failover")
	distinct := checkExactlyOnce(t, led, got)
	t.Logf("drained %d messages (%d distinct) through follower %s in %v; %d items acked, %d still in doubt",
		len(got), distinct, f.ID(), time.Since(start).Round(time.Millisecond), led.ackedCount(), len(led.maybe))
	if want["total"] != len(got) {
		t.Errorf("the leader says %s holds %d messages, a fresh group received %d", queue, want["total"], len(got))
	}
	for _, n := range c.nodes {
		n.requireRunning()
	}
}

// TestSigtermLeaderTransfersLeadership: SIGTERM on the leader hands
// leadership to another voter before the process exits, so a new leader is
// visible within 2 s (no election timeout to wait out), the process exits 0,
// pushes running through all three nodes lose nothing, and the stopped node
// restarts and rejoins as a follower.
func TestSigtermLeaderTransfersLeadership(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{})
	old := c.leader(10 * time.Second)
	const queue = "cluster-sigterm"
	led := newLedger()
	cl := &clusterLoad{c: c, queue: queue, prefix: "st", workers: 3, parts: 3, maxSize: 1, led: led, seed: uint64(time.Now().UnixNano())}
	cl.start()
	stopped := false
	defer func() {
		if !stopped {
			cl.abort()
		}
	}()
	if ok, _ := pollUntil(10*time.Second, 20*time.Millisecond, func() (bool, string) { return led.ackedCount() >= 100, "" }); !ok {
		t.Fatalf("only %d pushes acked in 10 s before the SIGTERM", led.ackedCount())
	}

	type exit struct {
		code int
		took time.Duration
	}
	exited := make(chan exit, 1)
	sent := time.Now()
	go func() {
		code, took := old.sigterm(15 * time.Second)
		exited <- exit{code, took}
	}()
	newID, visible, err := c.awaitNewLeader(old.ID(), sent, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ex exit
	select {
	case ex = <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("sigterm helper did not return")
	}
	t.Logf("SIGTERM to leader %s: new leader %s visible after %v; the process exited with code %d after %v",
		old.ID(), newID, visible.Round(time.Millisecond), ex.code, ex.took.Round(time.Millisecond))
	if visible > 2*time.Second {
		t.Errorf("a new leader became visible %v after SIGTERM to the leader; want within 2 s (leadership transfer)", visible)
	}
	if ex.code != 0 {
		t.Errorf("the leader exited with code %d after SIGTERM (after %v), want 0", ex.code, ex.took)
	}

	c.loadFor(time.Second, c.others(old)...)
	old.restart()
	rejoin := c.waitRejoined(old, 30*time.Second)
	t.Logf("node %s restarted and rejoined as a follower in %v", old.ID(), rejoin.Round(time.Millisecond))
	c.loadFor(500*time.Millisecond, c.nodes...)
	cl.finish()
	stopped = true
	t.Logf("load: %d items acked; %s", led.ackedCount(), cl.summary())
	cl.reportFaults(t)
	l := c.leader(10 * time.Second)
	f := old
	if f == l {
		f = c.others(l)[0]
	}
	got := drain(t, f.api(t), queue, "verify-sigterm")
	checkExactlyOnce(t, led, got)
	for _, n := range c.nodes {
		n.requireRunning()
	}
}
