package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKill9DuringPushLoad is the durability proof of DESIGN.md invariants 5
// and 7: with snapshots (and log truncation) happening all the time, a node
// killed with SIGKILL at a random moment under concurrent push load keeps
// every push it acknowledged, exactly once. Three kill/restart cycles, the
// pushing goes on after each restart, and the union is checked at the end.
func TestKill9DuringPushLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test; skipped with -short")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	n := startNode(t, nodeOpts{SnapshotThreshold: 200, SnapshotInterval: 100 * time.Millisecond})
	c := n.api(t)
	const queue = "load"
	led := newLedger()
	truncated := false
	killedAfterSnapshot := 0 // cycles whose kill came after at least one snapshot
	const cycles = 3

	for cycle := 1; cycle <= cycles; cycle++ {
		pl := &pushLoad{n: n, queue: queue, prefix: fmt.Sprintf("c%d", cycle), workers: 8, parts: 6, mixed: true,
			led: led, seed: seed + uint64(cycle)}
		before := led.ackedCount()
		pl.start()
		killAfter := 2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		deadline := time.Now().Add(killAfter)
		for time.Now().Before(deadline) {
			if n.Exited() {
				pl.halt()
				t.Fatalf("cycle %d: the node died under push load (not killed by the test): %v", cycle, n.ExitErr())
			}
			time.Sleep(20 * time.Millisecond)
		}
		lastIdx := c.metric("queen_raft_last_index")
		n.kill9()
		pl.halt()
		snaps := snapshots(n.DataDir())
		first, last, err := raftLogBounds(n.DataDir())
		if err != nil {
			t.Fatalf("cycle %d: read the Raft log after kill: %v", cycle, err)
		}
		if first > 1 {
			truncated = true
		}
		latest := uint64(0)
		if len(snaps) > 0 {
			latest = snaps[0].Index
		}
		t.Logf("cycle %d: SIGKILL after %v; %d items acked this cycle (%d total); last_index ~%v; raft log on disk [%d, %d]; newest snapshot index %d (%d kept)",
			cycle, killAfter.Round(time.Millisecond), led.ackedCount()-before, led.ackedCount(), lastIdx, first, last, latest, len(snaps))
		if len(snaps) > 0 {
			killedAfterSnapshot++
		}

		if cycle == 2 {
			// Crash anywhere includes the recovery: SIGKILL while the
			// restarted node elects itself and replays its log.
			early := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
			n.launch()
			time.Sleep(early)
			if n.Exited() {
				t.Fatalf("cycle %d: the restarted node exited on its own: %v", cycle, n.ExitErr())
			}
			n.kill9()
			t.Logf("cycle %d: restarted and SIGKILLed again %v into the recovery", cycle, early.Round(time.Millisecond))
		}
		n.restart()
		// Acked items from every cycle so far must still be known: a re-push
		// is a duplicate with the original id.
		repushDuplicates(t, n, led, queue, led.sample(rng, 40))
	}

	// Keep pushing after the last restart, then stop cleanly.
	pl := &pushLoad{n: n, queue: queue, prefix: fmt.Sprintf("c%d", cycles+1), workers: 8, parts: 6, mixed: true,
		led: led, seed: seed + 99}
	acked := led.ackedCount()
	pl.start()
	led.waitAcked(t, acked+200)
	pl.finish()
	n.requireRunning()

	led.mu.Lock()
	t.Logf("ledger: %d items acked, %d in doubt; requests: %d answered 201, %d cut by the kill, %d other statuses",
		len(led.acked), len(led.maybe), led.req201, led.reqErr, led.reqOther)
	for _, f := range led.faults {
		t.Errorf("push protocol violation: %s", f)
	}
	if led.nFault > len(led.faults) {
		t.Errorf("... %d push protocol violations in all", led.nFault)
	}
	led.mu.Unlock()
	if killedAfterSnapshot == 0 {
		// Only a very slow run gets here (fewer than 200 entries per cycle).
		t.Errorf("precondition: no kill came after a snapshot (threshold 200); the run did not exercise snapshots")
	}
	if !truncated {
		t.Logf("note: the Raft log was not truncated during this run (TrailingLogs keeps 10240 entries); TestKill9AfterSnapshot covers truncation")
	}

	start := time.Now()
	got := drain(t, c, queue, "verify-all")
	distinct := checkExactlyOnce(t, led, got)
	t.Logf("drained %d messages (%d distinct) in %v", len(got), distinct, time.Since(start).Round(time.Millisecond))
	if tot := c.queueTotals(queue)["total"]; tot != len(got) {
		t.Errorf("queue %s detail says total %d, but a fresh group received %d messages", queue, tot, len(got))
	}
	n.requireRunning()
}
