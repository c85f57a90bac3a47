package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

func signalled(w *parked) bool {
	select {
	case <-w.signal:
		return true
	default:
		return false
	}
}

func TestParkingSignalsTheHeadOfEachLineOnly(t *testing.T) {
	p := newParking()
	a := []*parked{p.join("", &command.Pop{Queue: "q"}), p.join("", &command.Pop{Queue: "q"}), p.join("", &command.Pop{Queue: "q"})}
	other := p.join("", &command.Pop{Queue: "q", ConsumerGroup: "g"})
	elsewhere := p.join("", &command.Pop{Queue: "r"})
	ns := p.join("", &command.Pop{Namespace: "billing"})
	p.notify(map[string]struct{}{"q": {}})
	for i, want := range []bool{true, false, false} {
		if got := signalled(a[i]); got != want {
			t.Fatalf("waiter %d signalled %v, want %v", i, got, want)
		}
	}
	if !signalled(other) || signalled(elsewhere) || !signalled(ns) {
		t.Fatal("each line watching q gets one signal; r's line none")
	}
	if !p.isHead(a[0]) || p.isHead(a[1]) || p.lookLimit(a[1]) != 3 {
		t.Fatal("line order")
	}
	p.leave(a[1]) // not the head: nobody needs to know
	if signalled(a[2]) {
		t.Fatal("a waiter behind the head left: no signal")
	}
	p.leave(a[0]) // the head left: the next looks out
	if !signalled(a[2]) || !p.isHead(a[2]) {
		t.Fatal("the new head is signalled")
	}
	p.notify(map[string]struct{}{"*": {}})
	if !signalled(a[2]) || !signalled(other) || !signalled(elsewhere) || !signalled(ns) {
		t.Fatal(`"*" signals every head`)
	}
	p.notify(map[string]struct{}{"q": {}})
	p.notify(map[string]struct{}{"q": {}})
	if !signalled(a[2]) || signalled(a[2]) {
		t.Fatal("signals are sticky and do not pile up")
	}
	b := p.join("", &command.Pop{Queue: "q"})
	p.wakeAll()
	for _, w := range []*parked{a[2], b, other, elsewhere, ns} {
		if !signalled(w) {
			t.Fatal("wakeAll signals every waiter")
		}
	}
	for _, w := range []*parked{a[2], b, other, elsewhere, ns} {
		p.leave(w)
	}
	if len(p.lines) != 0 || len(p.byQueue) != 0 {
		t.Fatalf("empty lines stay behind: %v %v", p.lines, p.byQueue)
	}
}

// A pop that proposes steps out of its line: the look-out passes on at
// once, and the line counts it in flight, so that no other pop of the line
// proposes for what it is about to take.
func TestParkingClaimsCountPopsInFlight(t *testing.T) {
	p := newParking()
	pop := func() *parked { return p.join("t", &command.Pop{Queue: "q"}) }
	a, b, c, d := pop(), pop(), pop(), pop()
	p.notify(map[string]struct{}{fsm.QueueKey("t", "q"): {}}) // a change a has not looked at yet
	if !p.claim(a, 2) {
		t.Fatal("the head found two partitions, none in flight: granted")
	}
	if p.isHead(a) || !p.isHead(b) || p.lookLimit(b) != 4 {
		t.Fatal("a claimed: b is the head, and a look counts for the three parked and the one in flight")
	}
	if !signalled(b) || signalled(c) || signalled(d) {
		t.Fatal("one partition left over beyond a's (and a's unseen change with it): exactly the new head is signalled")
	}
	if p.claim(b, 1) {
		t.Fatal("the one partition b found is the one a is taking: refused")
	}
	if !p.isHead(b) || p.count() != 3 {
		t.Fatal("a refused claim stays parked at the head")
	}
	if !p.claim(c, 3) {
		t.Fatal("three partitions, one in flight: granted")
	}
	if !signalled(b) || signalled(d) {
		t.Fatal("one partition left over beyond a's and c's: the head is signalled")
	}
	p.finish(a, false) // a delivered: the deferred line looks again
	if !signalled(b) {
		t.Fatal("a pop in flight that finishes signals a deferred line's head")
	}
	p.finish(c, true) // c took nothing and waits on: at the end of the line
	if p.lookLimit(b) != 3 || p.isHead(c) {
		t.Fatal("c is parked again, behind b and d")
	}
	for _, w := range []*parked{b, d, c} {
		p.leave(w)
	}
	if len(p.lines) != 0 || len(p.byQueue) != 0 {
		t.Fatalf("empty lines stay behind: %v %v", p.lines, p.byQueue)
	}
}

// parkPops parks n long-polling pops on queue and returns how many came
// back with a message, and a wait for them all.
func parkPops(n *Node, ctx context.Context, count int, in func() *command.Pop) (*atomic.Int64, func()) {
	var got atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.Pop(ctx, in(), 20*time.Second)
			if err == nil && len(res.Messages) > 0 {
				got.Add(int64(len(res.Messages)))
			}
		}()
	}
	return &got, wg.Wait
}

func waitParked(t *testing.T, n *Node, count int) {
	checkFor(t, 10*time.Second, func() error {
		if total := n.ParkedPops(); total != count {
			return fmt.Errorf("%d parked, want %d", total, count)
		}
		return nil
	})
}

func TestAPushWakesOnePopOfAThousandParked(t *testing.T) {
	n := mustStartNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	push := func(partition, txn string) {
		t.Helper()
		if _, err := n.Apply(ctx, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{
			{Queue: "many", Partition: partition, TransactionId: txn, Payload: []byte(`{}`)}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	push("p0", "warm-up") // the queue and the consumer group exist before anyone parks
	first, _ := n.Pop(ctx, &command.Pop{Queue: "many", Batch: 1, AutoAck: true}, 0)
	if len(first.Messages) != 1 {
		t.Fatal("warm-up pop")
	}
	const waiters = 1000
	got, wait := parkPops(n, ctx, waiters, func() *command.Pop { return &command.Pop{Queue: "many", Batch: 1, AutoAck: true} })
	waitParked(t, n, waiters)
	before := n.fsm.AppliedIndex()
	push("p0", "one")
	checkFor(t, 5*time.Second, func() error {
		if got.Load() != 1 {
			return fmt.Errorf("%d delivered", got.Load())
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // let any stray wake-up show itself
	// The push, the one pop that took it: a handful of entries, not one
	// pop entry per parked consumer.
	if entries := n.fsm.AppliedIndex() - before; entries > 4 {
		t.Fatalf("one push to %d parked pops cost %d log entries", waiters, entries)
	}
	waitParked(t, n, waiters-1)

	// Ten partitions at once: ten parked pops take one each, promptly.
	for i := 0; i < 10; i++ {
		push(fmt.Sprintf("burst-%d", i), fmt.Sprintf("b%d", i))
	}
	checkFor(t, 5*time.Second, func() error {
		if got.Load() != 11 {
			return fmt.Errorf("%d delivered, want 11", got.Load())
		}
		return nil
	})
	waitParked(t, n, waiters-11)
	cancel()
	wait()
}

func TestAParkedHeadThatLeavesHandsOverTheLookOut(t *testing.T) {
	n := mustStartNode(t)
	ctx := context.Background()
	if _, err := n.Apply(ctx, &command.Command{Body: &command.Command_Configure{Configure: &command.Configure{
		Queue: "lease", Options: &command.QueueOptions{LeaseTime: ptrInt64(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{
		{Queue: "lease", TransactionId: "m", Payload: []byte(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
	// Take the message and never ack: its lease runs out in a second, and
	// only time makes it deliverable again.
	if res, err := n.Pop(ctx, &command.Pop{Queue: "lease", Batch: 1}, 0); err != nil || len(res.Messages) != 1 {
		t.Fatalf("first pop: %v %v", res, err)
	}
	headCtx, leaveHead := context.WithCancel(ctx)
	headDone := make(chan struct{})
	go func() {
		defer close(headDone)
		n.Pop(headCtx, &command.Pop{Queue: "lease", Batch: 1}, 20*time.Second)
	}()
	waitParked(t, n, 1)
	got, wait := parkPops(n, ctx, 1, func() *command.Pop { return &command.Pop{Queue: "lease", Batch: 1} })
	waitParked(t, n, 2)
	leaveHead() // the head goes; the one behind must take over its timer
	<-headDone
	// The lease ran out about a second after the first pop; the waiter
	// behind must not sit until its own 20 s poll ends.
	checkFor(t, 5*time.Second, func() error {
		if got.Load() != 1 {
			return fmt.Errorf("the redelivery after the lease ran out reached nobody")
		}
		return nil
	})
	wait()
}

func ptrInt64(v int64) *int64 { return &v }

// A parked pop looks at the state when something wakes it, never on a clock
// of its own: an empty long poll looks when it parks and when its timeout
// ends (and at most once more per entry applied meanwhile, each of which may
// wake it), and lasts its whole timeout. A pop that sleep-polls looks each
// time a nap ends, however short its naps. And a push wakes a parked pop: it
// has the message long before its 20 s wait is up, which a pop that sleeps
// its wait out does not.
func TestALongPollLooksOnlyWhenWokenAndAPushWakesIt(t *testing.T) {
	n := mustStartNode(t)
	ctx := context.Background()
	if _, err := n.Apply(ctx, &command.Command{Body: &command.Command_Configure{Configure: &command.Configure{Queue: "lp"}}}); err != nil {
		t.Fatal(err)
	}
	const wait = 3 * time.Second
	looks, applied := n.parking.looks.Load(), n.fsm.AppliedIndex()
	start := time.Now()
	res, err := n.Pop(ctx, &command.Pop{Queue: "lp", Batch: 1}, wait)
	if took := time.Since(start); err != nil || len(res.Messages) != 0 || took < wait {
		t.Fatalf("a long poll of an empty queue: %v %v after %v, want nothing after its %v wait", res, err, took, wait)
	}
	entries := int64(n.fsm.AppliedIndex() - applied)
	got := n.parking.looks.Load() - looks
	t.Logf("an empty %v long poll looked at the state %d times, %d entries applied meanwhile", wait, got, entries)
	if got > 2+entries {
		t.Fatalf("an empty %v long poll looked at the state %d times with %d entries applied meanwhile: it polls", wait, got, entries)
	}

	popped, done := parkPops(n, ctx, 1, func() *command.Pop { return &command.Pop{Queue: "lp", Batch: 1} })
	waitParked(t, n, 1)
	if _, err := n.Apply(ctx, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{
		{Queue: "lp", TransactionId: "m", Payload: []byte(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error { // half the parked pop's 20 s wait
		if popped.Load() != 1 {
			return fmt.Errorf("the push did not reach the pop parked for it")
		}
		return nil
	})
	done()
}
