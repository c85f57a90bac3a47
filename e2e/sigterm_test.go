package e2e

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSIGTERMRestart: SIGTERM stops the node cleanly (exit 0, within a few
// seconds, also under push load and with a consumer long-polling), and a
// restart keeps everything.
func TestSIGTERMRestart(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	n := startNode(t, nodeOpts{})
	c := n.api(t)
	st := setupFixedState(t, c)
	stateQueues := []string{fixedQueue, "snap-dlq"}
	led := newLedger()
	const fill = "term-fill"
	g1 := "g1"
	base := "/api/v1/pop/queue/" + fixedQueue + "/partition/"

	// 1. SIGTERM under push load.
	pl := &pushLoad{n: n, queue: fill, prefix: "c1", workers: 4, parts: 3, mixed: true, led: led, seed: seed}
	pl.start()
	led.waitAcked(t, 200) // the load is under way
	before := captureState(c, stateQueues...)
	code, took := n.sigterm(10 * time.Second)
	pl.halt()
	t.Logf("SIGTERM under push load: exit code %d after %v; %d items acked", code, took.Round(time.Millisecond), led.ackedCount())
	if code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM under push load: exit code %d after %v, want 0 within 5 s", code, took)
	}
	n.restart()
	compareState(t, "after SIGTERM and restart", before, captureState(c, stateQueues...))
	if p := c.pop(base+"p1", qv("consumerGroup", g1)); p != nil {
		t.Errorf("g1 pop of p1 while its lease is live: %+v, want 204", p)
	}
	for i := 4; i < 10; i++ {
		a := c.ack(ackReq{TransactionID: fixedTxn(1, i), PartitionID: st.p1, ConsumerGroup: &g1, LeaseID: st.groupLease})
		if !a.Success || a.LeaseReleased != (i == 9) {
			t.Errorf("g1 ack of %s with the pre-restart lease: %+v", fixedTxn(1, i), a)
		}
	}
	p := c.pop(base+"p1", qv("consumerGroup", g1, "batch", "100"))
	expectTxns(t, "g1 p1 after restart", p, 1, 10, 10)
	c.ackAll(p, &g1)
	repushDuplicates(t, n, led, fill, led.sample(rng, 30))

	// 2. SIGTERM while a consumer long-polls an empty queue: the node must
	// still stop within a few seconds, and the parked pop must be answered.
	type got struct {
		r   *response
		err error
		at  time.Time
	}
	ch := make(chan got, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		r, err := n.do(ctx, "GET", "/api/v1/pop/queue/term-poll?wait=true&timeout=30000", nil)
		ch <- got{r, err, time.Now()}
	}()
	c.waitParked(1)
	before = captureState(c, stateQueues...)
	sent := time.Now()
	code, took = n.sigterm(15 * time.Second)
	t.Logf("SIGTERM with a parked long-poll: exit code %d after %v", code, took.Round(time.Millisecond))
	if code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM with a long-poll pop parked (wait=true&timeout=30000): exit code %d after %v, want exit 0 within 5 s", code, took.Round(time.Millisecond))
	}
	select {
	case g := <-ch:
		switch {
		case g.err != nil:
			t.Logf("parked long-poll: connection ended after %v: %v", g.at.Sub(sent).Round(time.Millisecond), g.err)
		default:
			t.Logf("parked long-poll: answered %d after %v", g.r.Status, g.at.Sub(sent).Round(time.Millisecond))
		}
	case <-time.After(5 * time.Second):
		t.Errorf("parked long-poll: no answer 5 s after the node exited")
	}
	n.restart()
	compareState(t, "after the second SIGTERM and restart", before, captureState(c, stateQueues...))

	// Everything acked is there exactly once.
	led.mu.Lock()
	for _, f := range led.faults {
		t.Errorf("push protocol violation: %s", f)
	}
	led.mu.Unlock()
	checkExactlyOnce(t, led, drain(t, c, fill, "verify-term"))
	n.requireRunning()
}
