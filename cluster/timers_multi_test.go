package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// TestTimersFireOnceAcrossLeaderLoss schedules timers that come due around
// the moment the leader is killed: the new leader continues from the
// replicated timer table, and each timer fires exactly once, never before
// its due time.
func TestTimersFireOnceAcrossLeaderLoss(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	f := c.followers()[0]
	const n = 60
	due := map[string]int64{}
	for i := 0; i < n; i++ {
		id := uuid.Must(uuid.NewV7())
		txn := fmt.Sprint("timer-", i)
		res, err := f.node.Apply(ctx, &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: []*command.TimerOp{{
			Kind: command.TimerOp_SCHEDULE, Queue: "fired", TimerKey: fmt.Sprint("k", i), Txn: txn,
			DelayUs: (time.Duration(i%20) * 50 * time.Millisecond).Microseconds(), Payload: []byte("1"), MessageId: id[:],
		}}}}})
		if err != nil {
			t.Fatal(err)
		}
		due[txn] = res.(*command.TimerBatchResult).Results[0].DeliverAtUs
	}
	old := c.leader()
	old.stop(true) // some timers are due now, some in the next second
	c.leader()
	survivor := c.followers()
	reader := c.leader()
	if len(survivor) > 0 {
		reader = survivor[0]
	}
	checkFor(t, 15*time.Second, func() error {
		var pending int64
		err := reader.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
			pending = rd.NextTimerDue()
			return nil
		})
		if err != nil {
			return err
		}
		if pending != 0 {
			return fmt.Errorf("timers still pending (next due %d)", pending)
		}
		return nil
	})
	got := map[string]int{}
	group := "check-" + uuid.NewString()
	for i := 0; i < 100; i++ {
		res, err := reader.node.Pop(ctx, &command.Pop{Queue: "fired", ConsumerGroup: group, Batch: 100}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			break
		}
		var acks []*command.AckItem
		for j, m := range res.Messages {
			rec := res.Records[j]
			got[rec.TransactionId]++
			if rec.CreatedUs < due[rec.TransactionId] {
				t.Fatalf("%s fired %dµs before it was due", rec.TransactionId, due[rec.TransactionId]-rec.CreatedUs)
			}
			acks = append(acks, &command.AckItem{TransactionId: rec.TransactionId, PartitionId: m.PartitionId,
				ConsumerGroup: group, LeaseId: res.LeaseId, Status: command.AckStatus_COMPLETED})
		}
		if _, err := reader.node.Apply(ctx, &command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: acks}}}); err != nil {
			t.Fatal(err)
		}
	}
	for txn := range due {
		if got[txn] != 1 {
			t.Fatalf("%s fired %d times, want exactly once", txn, got[txn])
		}
	}
}
