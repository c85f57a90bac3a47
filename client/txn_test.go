package queen_test

import (
	"errors"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

// The Once gate: the first commit marks and acks; a second delivery's
// commit finds the marker and comes back as a value, with nothing written.
func TestTransactionOnce(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		q := c.Queue("orders")
		if _, err := q.Push(ctx, queen.Msg{TransactionID: "o1"}, queen.Msg{TransactionID: "o2"}); err != nil {
			t.Fatal(err)
		}
		msgs, err := q.Pop(ctx, queen.PopOptions{Batch: 2})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		res, err := c.Transaction().Once("charges", "order-1", time.Hour).Ack(msgs[0]).
			Push("receipts", map[string]bool{"ok": true}, queen.WithTransactionID("r1")).Commit(ctx)
		if err != nil || !res.Committed || res.Precondition != nil || len(res.Results) != 3 || !msgs[0].Settled() {
			t.Fatalf("first commit: %+v %v", res, err)
		}
		if res.Results[1].MessageID == "" || res.Results[2].KV == nil || !res.Results[2].KV.Applied {
			t.Fatalf("results: %+v", res.Results)
		}

		// The same gate again: a value, not an error; nothing written.
		res, err = c.Transaction().Ack(msgs[1]).Push("receipts", 2).Once("charges", "order-1", time.Hour).Commit(ctx)
		if err != nil {
			t.Fatalf("a lost gate is not an error: %v", err)
		}
		if res.Committed || res.Precondition == nil || res.Precondition.Reason != "exists" || string(res.Precondition.Value) != "true" ||
			res.Precondition.FailedIndex != 2 || msgs[1].Settled() {
			t.Fatalf("second commit: %+v %+v", res, res.Precondition)
		}
		receipts, err := c.Queue("receipts").Pop(ctx, queen.PopOptions{Batch: 10})
		if err != nil || len(receipts) != 1 {
			t.Fatalf("the refused commit pushed: %d receipts, %v", len(receipts), err)
		}

		// A duplicate push and a stale ack are typed errors.
		_, err = c.Transaction().Push("receipts", 3, queen.WithTransactionID("r1")).Commit(ctx)
		var dup *queen.DuplicateError
		if !errors.As(err, &dup) {
			t.Fatalf("duplicate push: %v", err)
		}
		stale := &queen.Message{TransactionID: "o2", PartitionID: msgs[1].PartitionID, LeaseID: "gone", ConsumerGroup: msgs[1].ConsumerGroup}
		_, err = c.Transaction().Ack(stale).Commit(ctx)
		var rej *queen.RejectedAckError
		if !errors.As(err, &rej) || !errors.Is(err, queen.ErrLeaseLost) {
			t.Fatalf("stale ack: %v", err)
		}
		// A KV write that is not required does not hold the rest back.
		res, err = c.Transaction().Ack(msgs[1]).KV().PutIfAbsent("charges", "order-1", 1, time.Hour, false).Commit(ctx)
		if err != nil || !res.Committed || res.Results[1].KV.Applied || res.Results[1].KV.Reason != "exists" {
			t.Fatalf("optional gate: %+v %v", res, err)
		}
	})
}
