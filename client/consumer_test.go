package queen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

// errorLog collects what a consumer reports.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) add(err error) { l.mu.Lock(); l.errs = append(l.errs, err); l.mu.Unlock() }
func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// A 2 s lease and a handler that takes 3 s: the consumer renews the lease
// while the handler runs, so the ack afterwards succeeds. Without renewal
// the same ack is refused.
func TestConsumerRenewsLease(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 30*time.Second)
		for _, renew := range []time.Duration{0, -1} {
			q := c.Queue(fmt.Sprintf("slow-%d", renew))
			if err := q.Configure(ctx, queen.LeaseTime(2*time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Push(ctx, queen.Msg{Data: "job"}); err != nil {
				t.Fatal(err)
			}
			var log errorLog
			cons := q.Consumer(queen.ConsumerOptions{RenewEvery: renew, Wait: time.Second, OnError: log.add})
			var handled *queen.Message
			err := cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
				handled = m
				time.Sleep(3 * time.Second)
				cons.Stop()
				return nil
			})
			if err != nil || handled == nil {
				t.Fatalf("run: %v, handled %v", err, handled)
			}
			if renew == 0 && (!handled.Settled() || len(log.all()) != 0) {
				t.Fatalf("renewed lease: settled=%v, errors %v", handled.Settled(), log.all())
			}
			if renew < 0 && (handled.Settled() || !errors.Is(errors.Join(log.all()...), queen.ErrLeaseLost)) {
				t.Fatalf("without renewal the ack should be refused: settled=%v, errors %v", handled.Settled(), log.all())
			}
		}
	})
}

// Stop lets the batch in hand finish and be acked, abandons the other
// worker's long-poll, and pops nothing new.
func TestConsumerGracefulStop(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 30*time.Second)
		q := c.Queue("stop")
		if _, err := q.Push(ctx, queen.Msg{Data: 1}, queen.Msg{Data: 2}, queen.Msg{Data: 3}); err != nil {
			t.Fatal(err)
		}
		cons := q.Consumer(queen.ConsumerOptions{Group: "g", Subscription: queen.SubscribeAll, Concurrency: 2, Wait: 20 * time.Second})
		var calls atomic.Int32
		var first *queen.Message
		start := time.Now()
		err := cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
			calls.Add(1)
			first = m
			cons.Stop()
			time.Sleep(500 * time.Millisecond) // in flight while stopping
			return nil
		})
		took := time.Since(start)
		if err != nil || calls.Load() != 1 || !first.Settled() {
			t.Fatalf("run: %v, %d calls, settled %v", err, calls.Load(), first != nil && first.Settled())
		}
		if took > 5*time.Second {
			t.Fatalf("Run took %v to stop: the idle worker's long-poll was not abandoned", took)
		}
		rest, err := q.Pop(ctx, queen.PopOptions{Group: "g", Batch: 10})
		if err != nil || len(rest) != 2 {
			t.Fatalf("after stop, %d messages left unclaimed (%v), want 2", len(rest), err)
		}
	})
}

// A handler error nacks the message with the error's text: with retryLimit
// 0 it goes to the dead-letter queue with that text.
func TestConsumerNackCarriesErrorText(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, n *grpctest.Node) {
		ctx := ctxT(t, 30*time.Second)
		q := c.Queue("declines")
		if err := q.Configure(ctx, queen.RetryLimit(0)); err != nil {
			t.Fatal(err)
		}
		q.Push(ctx, queen.Msg{Data: "card"})
		cons := q.Consumer(queen.ConsumerOptions{Wait: time.Second})
		err := cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
			cons.Stop()
			return errors.New("card declined")
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(n.HTTPURL + "/api/v1/dlq?queue=declines")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var dlq struct {
			Messages []struct{ ErrorMessage string }
		}
		json.NewDecoder(resp.Body).Decode(&dlq)
		if len(dlq.Messages) != 1 || dlq.Messages[0].ErrorMessage != "card declined" {
			t.Fatalf("dlq: %+v", dlq)
		}
	})
}

// Four workers over eight partitions handle every message once.
func TestConsumerConcurrency(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 30*time.Second)
		q := c.Queue("many")
		var msgs []queen.Msg
		for i := range 80 {
			msgs = append(msgs, queen.Msg{Data: i, Partition: fmt.Sprint("p", i%8)})
		}
		if _, err := q.Push(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		cons := q.Consumer(queen.ConsumerOptions{Concurrency: 4, Batch: 5, Wait: time.Second})
		var mu sync.Mutex
		seen := map[string]int{}
		err := cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
			mu.Lock()
			defer mu.Unlock()
			seen[m.TransactionID]++
			if len(seen) == len(msgs) {
				cons.Stop()
			}
			return nil
		})
		if err != nil || len(seen) != len(msgs) {
			t.Fatalf("run: %v, %d distinct messages", err, len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s handled %d times", id, n)
			}
		}
	})
}
