package queen_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

// onceRun pushes n orders over 8 partitions and runs a OnceConsumer over
// them until every order's marker committed (or its effect was found
// marked), handling each order with h. It returns how often h ran per
// order and the outcomes told.
type onceRun struct {
	mu       sync.Mutex
	calls    map[string]int
	outcomes map[string][]queen.OnceSettled
}

func runOnce(t *testing.T, c *queen.Client, queue string, n int, o queen.OnceOptions,
	h func(r *onceRun, ctx context.Context, m *queen.Message, e *queen.Effect) error) *onceRun {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	var msgs []queen.Msg
	for i := range n {
		msgs = append(msgs, queen.Msg{TransactionID: fmt.Sprintf("order-%03d", i), Partition: fmt.Sprint("p", i%8), Data: map[string]int{"n": i}})
	}
	if _, err := c.Queue(queue).Push(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	r := &onceRun{calls: map[string]int{}, outcomes: map[string][]queen.OnceSettled{}}
	done := make(chan struct{})
	var closeOnce sync.Once
	o.Namespace, o.Subscription = "charges-"+queue, queen.SubscribeAll
	o.Wait = 500 * time.Millisecond
	o.OnSettled = func(m *queen.Message, s queen.OnceSettled) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.outcomes[m.TransactionID] = append(r.outcomes[m.TransactionID], s)
		settled := 0
		for _, ss := range r.outcomes {
			for _, s := range ss {
				if s.Acked && (s.Outcome == queen.OnceCommitted || s.Outcome == queen.OnceMarked) {
					settled++
					break
				}
			}
		}
		if settled == n {
			closeOnce.Do(func() { close(done) })
		}
	}
	cons := c.Queue(queue).OnceConsumer(o)
	errc := make(chan error, 1)
	go func() {
		errc <- cons.Run(ctx, func(ctx context.Context, m *queen.Message, e *queen.Effect) error {
			r.mu.Lock()
			r.calls[m.TransactionID]++
			r.mu.Unlock()
			return h(r, ctx, m, e)
		})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("not every order settled: %d of %d told", len(r.outcomes), n)
	}
	cons.Stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return r
}

// ledger reads every entry of the ledger queue (a fresh group from the
// start) and counts them by order.
func ledger(t *testing.T, c *queen.Client, queue string) map[string]int {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	out := map[string]int{}
	for {
		msgs, err := c.Queue(queue).Pop(ctx, queen.PopOptions{Group: "audit", Batch: 100, Partitions: 8, Subscription: queen.SubscribeAll})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			var e struct{ Order string }
			m.Decode(&e)
			out[e.Order]++
		}
		if _, err := c.AckBatch(ctx, settleAll(msgs)); err != nil {
			t.Fatal(err)
		}
	}
}

func settleAll(msgs []*queen.Message) []queen.Settle {
	s := make([]queen.Settle, len(msgs))
	for i, m := range msgs {
		s[i] = queen.Settle{Message: m}
	}
	return s
}

// The batched charge loop: every order's effect (a ledger entry) commits
// exactly once with its marker, a failing order comes back and is decided
// again, and the handler is never called for an order already marked.
func TestOnceConsumerCommitsEachEffectOnce(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 10*time.Second)
		if err := c.Queue("orders").Configure(ctx, queen.RetryDelay(50*time.Millisecond), queen.RetryLimit(5)); err != nil {
			t.Fatal(err)
		}
		r := runOnce(t, c, "orders", 200, queen.OnceOptions{ConsumerOptions: queen.ConsumerOptions{Group: "billing", Batch: 10, Concurrency: 4}},
			func(r *onceRun, _ context.Context, m *queen.Message, e *queen.Effect) error {
				r.mu.Lock()
				first := r.calls[m.TransactionID] == 1
				r.mu.Unlock()
				if first && m.TransactionID[len(m.TransactionID)-1] == '7' {
					return errors.New("gateway timeout") // fails once, then succeeds
				}
				e.Mark("ch_" + m.TransactionID)
				e.Push("ledger", map[string]string{"order": m.TransactionID})
				return nil
			})
		led := ledger(t, c, "ledger")
		if len(led) != 200 {
			t.Fatalf("%d orders in the ledger, want 200", len(led))
		}
		for id, n := range led {
			if n != 1 {
				t.Errorf("%s is in the ledger %d times", id, n)
			}
		}
		for id, n := range r.calls {
			want := 1
			if id[len(id)-1] == '7' {
				want = 2
			}
			if n != want {
				t.Errorf("%s decided %d times, want %d", id, n, want)
			}
		}
	})
}

// A lost marker race and a lost lease roll a whole batch back; the
// consumer commits again without deciding anything again: the order whose
// marker another consumer committed keeps only its ack (its effect is the
// other's), and the orders whose lease ran out keep their effect and
// marker without the ack, so that their next delivery finds the marker.
func TestOnceConsumerRecoversALostRaceAndALostLease(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 10*time.Second)
		if err := c.Queue("races").Configure(ctx, queen.LeaseTime(time.Second)); err != nil {
			t.Fatal(err)
		}
		ns := "charges-races"
		r := runOnce(t, c, "races", 40, queen.OnceOptions{ConsumerOptions: queen.ConsumerOptions{Group: "billing", Batch: 5, RenewEvery: -1}},
			func(r *onceRun, ctx context.Context, m *queen.Message, e *queen.Effect) error {
				switch m.TransactionID {
				case "order-003":
					// Another consumer commits this order's marker (and its
					// effect) while the batch is being decided.
					if _, err := c.Transaction().KV().PutIfAbsent(ns, m.TransactionID, "ch_other", 0, true).
						Push("ledger-races", map[string]string{"order": m.TransactionID}).Commit(ctx); err != nil {
						return err
					}
				case "order-012":
					time.Sleep(1500 * time.Millisecond) // the batch's lease runs out
				}
				e.Mark("ch_" + m.TransactionID)
				e.Push("ledger-races", map[string]string{"order": m.TransactionID})
				return nil
			})
		led := ledger(t, c, "ledger-races")
		if len(led) != 40 {
			t.Fatalf("%d orders in the ledger, want 40", len(led))
		}
		for id, n := range led {
			if n != 1 {
				t.Errorf("%s is in the ledger %d times", id, n)
			}
		}
		for id, n := range r.calls {
			if n != 1 {
				t.Errorf("%s decided %d times: charged again", id, n)
			}
		}
		race := r.outcomes["order-003"]
		if len(race) != 1 || race[0].Outcome != queen.OnceMarked || !race[0].Acked || string(race[0].Marker) != `"ch_other"` {
			t.Errorf("the order whose race was lost: %+v", race)
		}
		lease := r.outcomes["order-012"]
		if len(lease) != 2 || lease[0].Outcome != queen.OnceCommitted || lease[0].Acked ||
			lease[1].Outcome != queen.OnceMarked || !lease[1].Acked {
			t.Errorf("the order whose lease ran out: %+v", lease)
		}
	})
}
