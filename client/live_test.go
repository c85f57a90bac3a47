package queen_test

import (
	"context"
	"errors"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

// transports runs f once per transport against its own fresh node.
func transports(t *testing.T, f func(t *testing.T, c *queen.Client, n *grpctest.Node)) {
	for _, tr := range []string{"http", "grpc"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			n := grpctest.Start(t, grpctest.Options{})
			f(t, dialNode(t, n, tr), n)
		})
	}
}

func dialNode(t testing.TB, n *grpctest.Node, tr string, opts ...queen.Option) *queen.Client {
	t.Helper()
	target := n.HTTPURL
	if tr == "grpc" {
		target = "grpc://" + n.GRPCAddr
	}
	c, err := queen.New(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestPushPopAck(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		q := c.Queue("orders")
		res, err := q.Push(ctx, queen.Msg{TransactionID: "o1", Data: map[string]int{"n": 1}},
			queen.Msg{Data: nil}, queen.Msg{TransactionID: "o1", Data: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 3 || res[0].Status != "queued" || res[2].Status != "duplicate" || res[2].MessageID != res[0].MessageID {
			t.Fatalf("push: %+v", res)
		}
		if len(res[1].TransactionID) != 36 || res[1].TransactionID[14] != '7' {
			t.Fatalf("minted transactionId %q is not a UUIDv7", res[1].TransactionID)
		}
		msgs, err := q.Pop(ctx, queen.PopOptions{Batch: 10})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		var body struct{ N int }
		if err := msgs[0].Decode(&body); err != nil || body.N != 1 || string(msgs[1].Data) != "null" {
			t.Fatalf("payloads: %s %s %v", msgs[0].Data, msgs[1].Data, err)
		}
		if msgs[0].LeaseID == "" || msgs[0].PartitionID == "" || msgs[0].LeaseExpiresAt.Before(time.Now()) || msgs[0].CreatedAt.IsZero() {
			t.Fatalf("message fields: %+v", msgs[0])
		}
		if err := c.Ack(ctx, msgs[0]); err != nil || !msgs[0].Settled() {
			t.Fatalf("ack: %v", err)
		}
		if err := c.Ack(ctx, msgs[0]); err != nil {
			t.Fatalf("a repeated ack is a no-op, not an error: %v", err)
		}
		stale := &queen.Message{TransactionID: msgs[1].TransactionID, PartitionID: msgs[1].PartitionID,
			LeaseID: "stale", ConsumerGroup: msgs[1].ConsumerGroup}
		var ae *queen.AckError
		if err := c.Ack(ctx, stale); !errors.As(err, &ae) || !errors.Is(err, queen.ErrLeaseLost) {
			t.Fatalf("ack under a stale lease: %v", err)
		}
		if err := c.Nack(ctx, msgs[1], "boom"); err != nil {
			t.Fatalf("nack: %v", err)
		}
		// The nacked message comes back (retryDelay 1 s by default).
		again, err := q.Pop(ctx, queen.PopOptions{Wait: 5 * time.Second})
		if err != nil || len(again) != 1 || again[0].TransactionID != msgs[1].TransactionID || again[0].RetryCount != 1 {
			t.Fatalf("redelivery: %+v %v", again, err)
		}
		if _, err := c.ExtendLease(ctx, again[0].LeaseID, time.Minute); err != nil {
			t.Fatalf("extend: %v", err)
		}
		if _, err := c.AckBatch(ctx, []queen.Settle{{Message: again[0]}}); err != nil || !again[0].Settled() {
			t.Fatalf("ack batch: %v", err)
		}
		if _, err := c.ExtendLease(ctx, again[0].LeaseID, time.Minute); !errors.Is(err, queen.ErrLeaseLost) {
			t.Fatalf("extend of a released lease: %v", err)
		}
		if err := q.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKV(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		kv := c.KV()
		w, err := kv.Put(ctx, "ns", "a", map[string]string{"x": "y"}, time.Hour)
		if err != nil || !w.Applied || w.Version == 0 {
			t.Fatalf("put: %+v %v", w, err)
		}
		w, err = kv.PutIfAbsent(ctx, "ns", "a", 2, 0)
		if err != nil || w.Applied || w.Reason != "exists" {
			t.Fatalf("putIfAbsent over an existing key: %+v %v", w, err)
		}
		e, err := kv.Get(ctx, "ns", "a")
		if err != nil || !e.Found || string(e.Value) != `{"x":"y"}` || e.ExpiresAt.IsZero() {
			t.Fatalf("get: %+v %v", e, err)
		}
		rows, err := kv.GetMany(ctx, "ns", "a", "b")
		if err != nil || len(rows.Rows) != 1 || len(rows.Missing) != 1 || rows.Missing[0] != "b" {
			t.Fatalf("getMany: %+v %v", rows, err)
		}
		if w, err := kv.Delete(ctx, "ns", "a"); err != nil || !w.Applied {
			t.Fatalf("delete: %+v %v", w, err)
		}
		if e, err := kv.Get(ctx, "ns", "a"); err != nil || e.Found {
			t.Fatalf("get after delete: %+v %v", e, err)
		}
	})
}
