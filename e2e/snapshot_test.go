package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixedState is a small state with every kind of record the restart must
// keep: messages in two partitions, a named group's cursor and a live
// partially acked lease, queue mode's cursor and lease, a dead letter and a
// KV entry.
type fixedState struct {
	p0, p1     string // partition ids of "snap"
	groupLease string // g1's live lease on p1: s1-04..s1-09 outstanding
	queueLease string // queue mode's live lease on p1: s1-01, s1-02 outstanding
}

const fixedQueue = "snap"

func fixedTxn(part, i int) string { return fmt.Sprintf("s%d-%02d", part, i) }

func setupFixedState(t *testing.T, c *api) *fixedState {
	t.Helper()
	c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": fixedQueue, "namespace": "fixed"})
	var items []pushItem
	for part := 0; part < 2; part++ {
		for i := 0; i < 20; i++ {
			items = append(items, pushItem{Queue: fixedQueue, Partition: fmt.Sprintf("p%d", part),
				TransactionID: fixedTxn(part, i), Payload: map[string]any{"part": part, "i": i}})
		}
	}
	res := c.push(items...)
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("fixed state push %d: %+v", i, r)
		}
	}
	st := &fixedState{p0: res[0].PartitionID, p1: res[20].PartitionID}
	g1 := "g1"
	base := "/api/v1/pop/queue/" + fixedQueue + "/partition/"

	// g1: p0 consumed up to s0-06; p1 delivered s1-00..09, acked s1-00..03.
	p := c.pop(base+"p0", qv("consumerGroup", g1, "subscriptionMode", "all", "batch", "7"))
	expectTxns(t, "g1 p0 first pop", p, 0, 0, 7)
	c.ackAll(p, &g1)
	p = c.pop(base+"p1", qv("consumerGroup", g1, "subscriptionMode", "all", "batch", "10"))
	expectTxns(t, "g1 p1 first pop", p, 1, 0, 10)
	st.groupLease = p.LeaseID
	for i := 0; i < 4; i++ {
		a := c.ack(ackReq{TransactionID: fixedTxn(1, i), PartitionID: st.p1, ConsumerGroup: &g1, LeaseID: p.LeaseID})
		if !a.Success || a.LeaseReleased {
			t.Fatalf("g1 ack %s: %+v", fixedTxn(1, i), a)
		}
	}
	// Queue mode: p0 consumed up to s0-04; p1 delivered s1-00..02, acked s1-00.
	p = c.pop(base+"p0", qv("batch", "5"))
	expectTxns(t, "queue-mode p0 first pop", p, 0, 0, 5)
	c.ackAll(p, nil)
	p = c.pop(base+"p1", qv("batch", "3"))
	expectTxns(t, "queue-mode p1 first pop", p, 1, 0, 3)
	st.queueLease = p.LeaseID
	if a := c.ack(ackReq{TransactionID: fixedTxn(1, 0), PartitionID: st.p1, LeaseID: p.LeaseID}); !a.Success {
		t.Fatalf("queue-mode ack s1-00: %+v", a)
	}
	// A dead letter.
	c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "snap-dlq", "options": map[string]any{"retryLimit": 0}})
	c.pushOne(pushItem{Queue: "snap-dlq", TransactionID: "x-1", Payload: map[string]any{"card": "4242"}}, "queued")
	p = c.pop("/api/v1/pop/queue/snap-dlq", nil)
	if p == nil {
		t.Fatal("pop snap-dlq: 204")
	}
	if a := c.ack(ackReq{TransactionID: "x-1", PartitionID: p.PartitionID, LeaseID: p.LeaseID, Status: "failed", Error: strp("card declined")}); !a.DLQ {
		t.Fatalf("failed ack with retryLimit 0: %+v, want dlq:true", a)
	}
	// A KV entry.
	c.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{map[string]any{
		"op": "put", "ns": "snap", "key": "charge:1", "value": map[string]any{"chargeId": "ch_1"}, "forever": true}}})
	return st
}

// expectTxns requires p to hold exactly s<part>-<from>..s<part>-<from+n-1>.
func expectTxns(t testing.TB, what string, p *popResponse, part, from, n int) {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: 204, want %s..%s", what, fixedTxn(part, from), fixedTxn(part, from+n-1))
	}
	var got []string
	for _, m := range p.Messages {
		got = append(got, m.TransactionID)
	}
	ok := len(got) == n
	for i := 0; ok && i < n; i++ {
		ok = got[i] == fixedTxn(part, from+i)
	}
	if !ok {
		t.Fatalf("%s: got %v, want %s..%s in order", what, got, fixedTxn(part, from), fixedTxn(part, from+n-1))
	}
}

// captureState reads the parts of the state a restart must keep, as raw
// JSON, by name.
func captureState(c *api, queues ...string) map[string][]byte {
	c.t.Helper()
	out := map[string][]byte{}
	for _, q := range queues {
		out["detail "+q] = c.queueDetail(q)
	}
	out["dlq"] = c.mustStatus(200, "GET", "/api/v1/dlq?queue=snap-dlq", nil).Body
	out["kv"] = c.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{
		map[string]any{"op": "get", "ns": "snap", "key": "charge:1"}}}).Body
	return out
}

func compareState(t testing.TB, when string, before, after map[string][]byte) {
	t.Helper()
	for k, b := range before {
		if !jsonEq(b, after[k]) {
			t.Errorf("%s: %s differs:\n before: %s\n after:  %s", when, k, b, after[k])
		}
	}
}

// killRightAfterSnapshot runs the push load and SIGKILLs the node as soon
// as the need-th new snapshot with index >= minIndex is complete on disk.
func killRightAfterSnapshot(t *testing.T, n *node, pl *pushLoad, minIndex uint64, need int) snapInfo {
	t.Helper()
	known := map[string]bool{}
	for _, s := range snapshots(n.DataDir()) {
		known[s.ID] = true
	}
	pl.start()
	deadline := time.Now().Add(40 * time.Second)
	found := 0
	for i := 0; time.Now().Before(deadline) && i < 100000; i++ {
		if n.Exited() {
			pl.halt()
			t.Fatalf("the node died under load (not killed by the test): %v", n.ExitErr())
		}
		for _, s := range snapshots(n.DataDir()) {
			if known[s.ID] {
				continue
			}
			known[s.ID] = true
			if s.Index < minIndex {
				continue
			}
			if found++; found >= need {
				n.kill9()
				pl.halt()
				return s
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	pl.halt()
	t.Fatalf("no new snapshot with index >= %d within 40 s", minIndex)
	return snapInfo{}
}

// TestKill9AfterSnapshot kills the node right after a snapshot is written,
// and again right after the log has been truncated behind a snapshot
// (DESIGN.md, "The storage trap"). The state after each restart must equal
// the state before, including a consumer group's cursor and live lease, and
// must equal a replay of the snapshot plus the log on a fresh state file.
func TestKill9AfterSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("load test; skipped with -short")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := startNode(t, nodeOpts{SnapshotThreshold: 100, SnapshotInterval: 50 * time.Millisecond})
	c := n.api(t)
	st := setupFixedState(t, c)
	stateQueues := []string{fixedQueue, "snap-dlq"}
	before := captureState(c, stateQueues...)
	led := newLedger()
	const fill = "snap-fill"
	g1 := "g1"
	base := "/api/v1/pop/queue/" + fixedQueue + "/partition/"

	// Phase A: SIGKILL right after a snapshot completes.
	snap := killRightAfterSnapshot(t, n, &pushLoad{n: n, queue: fill, prefix: "c1", workers: 8, parts: 4, led: led, seed: seed}, 0, 1)
	first, last, err := raftLogBounds(n.DataDir())
	must(t, err)
	t.Logf("phase A: killed right after snapshot %s (index %d); raft log on disk [%d, %d]; %d fill items acked",
		snap.ID, snap.Index, first, last, led.ackedCount())
	n.restart()
	compareState(t, "after kill -9 right after a snapshot", before, captureState(c, stateQueues...))
	// g1's lease survived: p1 is still held, and the old leaseId still acks.
	if p := c.pop(base+"p1", qv("consumerGroup", g1)); p != nil {
		t.Errorf("phase A: g1 pop of p1 while its lease is live: %+v, want 204", p)
	}
	for i := 4; i < 6; i++ {
		a := c.ack(ackReq{TransactionID: fixedTxn(1, i), PartitionID: st.p1, ConsumerGroup: &g1, LeaseID: st.groupLease})
		if !a.Success || a.LeaseReleased {
			t.Errorf("phase A: g1 ack of %s with the pre-kill lease: %+v, want success, lease kept", fixedTxn(1, i), a)
		}
	}
	repushDuplicates(t, n, led, fill, led.sample(rng, 20))
	before = captureState(c, stateQueues...)

	// Phase B: push past the log's trailing window (10240 entries) so that
	// snapshots truncate it, then SIGKILL right after the second such
	// snapshot (the first one's truncation is then surely done).
	const trailing = 10240
	plB := &pushLoad{n: n, queue: fill, prefix: "c2", workers: 32, parts: 4, led: led, seed: seed + 1}
	plB.start()
	reached := false
	for i := 0; i < 600; i++ {
		if n.Exited() {
			plB.halt()
			t.Fatalf("phase B: the node died under load: %v", n.ExitErr())
		}
		if c.metric("queen_raft_last_index") >= trailing+300 {
			reached = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	plB.finish()
	if !reached {
		t.Fatalf("phase B: queen_raft_last_index did not reach %d in 60 s", trailing+300)
	}
	applied := c.metric("queen_raft_applied_index")
	plB = &pushLoad{n: n, queue: fill, prefix: "c3", workers: 8, parts: 4, led: led, seed: seed + 2}
	snap = killRightAfterSnapshot(t, n, plB, trailing+200, 2)
	first, last, err = raftLogBounds(n.DataDir())
	must(t, err)
	t.Logf("phase B: applied index was %v; killed right after snapshot %s (index %d); raft log on disk [%d, %d]; %d fill items acked",
		applied, snap.ID, snap.Index, first, last, led.ackedCount())
	if first <= 1 {
		t.Errorf("phase B: the Raft log was not truncated (first index %d, snapshot index %d): the test did not reach its precondition", first, snap.Index)
	}
	n.restart()
	compareState(t, "after kill -9 right after a log truncation", before, captureState(c, stateQueues...))

	// g1 continues exactly where it was.
	if p := c.pop(base+"p1", qv("consumerGroup", g1)); p != nil {
		t.Errorf("phase B: g1 pop of p1 while its lease is live: %+v, want 204", p)
	}
	for i := 6; i < 10; i++ {
		a := c.ack(ackReq{TransactionID: fixedTxn(1, i), PartitionID: st.p1, ConsumerGroup: &g1, LeaseID: st.groupLease})
		if !a.Success || a.LeaseReleased != (i == 9) {
			t.Errorf("phase B: g1 ack of %s with the pre-kill lease: %+v, want success (leaseReleased on the last)", fixedTxn(1, i), a)
		}
	}
	p := c.pop(base+"p1", qv("consumerGroup", g1, "batch", "100"))
	expectTxns(t, "g1 p1 after restarts", p, 1, 10, 10)
	c.ackAll(p, &g1)
	p = c.pop(base+"p0", qv("consumerGroup", g1, "batch", "100"))
	expectTxns(t, "g1 p0 after restarts", p, 0, 7, 13)
	c.ackAll(p, &g1)
	// Queue mode too.
	if p := c.pop(base+"p1", nil); p != nil {
		t.Errorf("queue-mode pop of p1 while its lease is live: %+v, want 204", p)
	}
	for i := 1; i < 3; i++ {
		if a := c.ack(ackReq{TransactionID: fixedTxn(1, i), PartitionID: st.p1, LeaseID: st.queueLease}); !a.Success {
			t.Errorf("queue-mode ack of %s with the pre-kill lease: %+v", fixedTxn(1, i), a)
		}
	}
	p = c.pop(base+"p1", qv("batch", "100"))
	expectTxns(t, "queue-mode p1 after restarts", p, 1, 3, 17)
	c.ackAll(p, nil)
	p = c.pop(base+"p0", qv("batch", "100"))
	expectTxns(t, "queue-mode p0 after restarts", p, 0, 5, 15)
	c.ackAll(p, nil)
	if p := c.pop("/api/v1/pop/queue/"+fixedQueue, qv("consumerGroup", g1)); p != nil {
		t.Errorf("g1 has read everything, yet: %+v", p)
	}

	// Every acked fill item, exactly once; every acked id still deduplicated.
	repushDuplicates(t, n, led, fill, led.sample(rng, 40))
	led.mu.Lock()
	for _, f := range led.faults {
		t.Errorf("push protocol violation: %s", f)
	}
	led.mu.Unlock()
	got := drain(t, c, fill, "verify-fill")
	checkExactlyOnce(t, led, got)
	if tot := c.queueTotals(fill)["total"]; tot != len(got) {
		t.Errorf("queue %s detail says total %d, a fresh group received %d", fill, tot, len(got))
	}

	// Replay: the newest snapshot plus the log, applied to an empty state
	// file, must give the same state as the node's own file.
	final := captureState(c, fixedQueue, "snap-dlq", fill)
	list := c.mustStatus(200, "GET", "/api/v1/resources/queues", nil).Body
	code, took := n.sigterm(10 * time.Second)
	if code != 0 {
		t.Fatalf("SIGTERM: exit code %d after %v", code, took)
	}
	replayDir := filepath.Join(t.TempDir(), "replay")
	must(t, copyDir(filepath.Join(n.DataDir(), "raft"), filepath.Join(replayDir, "raft")))
	format, err := os.ReadFile(filepath.Join(n.DataDir(), "FORMAT")) // the data dir's record of its formats
	must(t, err)
	must(t, os.WriteFile(filepath.Join(replayDir, "FORMAT"), format, 0o644))
	r := startNode(t, nodeOpts{SnapshotThreshold: 100, SnapshotInterval: 50 * time.Millisecond, DataDir: replayDir})
	rc := r.api(t)
	compareState(t, "replay of snapshot + log vs the node's own state file", final, captureState(rc, fixedQueue, "snap-dlq", fill))
	compareState(t, "replay: queue list", map[string][]byte{"queues": list},
		map[string][]byte{"queues": rc.mustStatus(200, "GET", "/api/v1/resources/queues", nil).Body})
	if p := rc.pop("/api/v1/pop/queue/"+fixedQueue, qv("consumerGroup", g1)); p != nil {
		t.Errorf("replay: g1 gets messages it had consumed: %+v", p)
	}
	repushDuplicates(t, r, led, fill, led.sample(rng, 20))
}
