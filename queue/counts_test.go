package queue

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// A queue's counts sum its partitions' queue-mode counts, and take its
// dead letters from every group; another queue's (even one whose name
// starts with this one's) are not in them.
func TestQueueCountsSumPartitionsAndDeadLetters(t *testing.T) {
	h := newDomain(t, "0")
	h.apply(true, func(tx *Tx) { tx.Configure(&command.Configure{Queue: "empty"}) })
	pushedUs := h.now + 1000 // the next entry's time
	h.push(item("q", "p1", "a1"), item("q", "p1", "a2"), item("q", "p1", "a3"),
		item("q", "p2", "b1"), item("q", "p2", "b2"), item("q", "p3", "c1"), item("q2", "p1", "z1"))
	// A bus group dead-letters a message: a dead letter of the queue, no
	// change to what queue mode counts.
	h.apply(true, func(tx *Tx) {
		tx.Pop(&command.Pop{Queue: "q", ConsumerGroup: "g", Subscription: command.Pop_DEFAULT_ALL, LeaseId: "sub"}, true, GroupPolicy)
	})
	h.deadLetter("q", "g")
	// Queue mode: p1 has a1 completed and a2 leased; p2 dead-letters b1;
	// p3's c1 failed once and waits for its retry.
	popPartition := func(partition string, batch uint32) *command.PopResult {
		t.Helper()
		res := h.pop(&command.Pop{Queue: "q", Partition: partition, HasPartition: true, Batch: batch, LeaseId: "l-" + partition})
		if len(res.Messages) != int(batch) {
			t.Fatalf("pop %s: %d messages", partition, len(res.Messages))
		}
		return res
	}
	settle := func(res *command.PopResult, txn string, status command.AckStatus) {
		t.Helper()
		if r := h.ack(&command.AckItem{TransactionId: txn, PartitionId: res.Messages[0].PartitionId, LeaseId: res.LeaseId,
			Status: status}); !r[0].Success {
			t.Fatalf("ack %s: %v", txn, r[0])
		}
	}
	settle(popPartition("p1", 2), "a1", command.AckStatus_COMPLETED)
	settle(popPartition("p2", 1), "b1", command.AckStatus_DLQ)
	settle(popPartition("p3", 1), "c1", command.AckStatus_FAILED)
	h.deadLetter("q2", "")

	h.read(func(rd *Reader) {
		c := rd.Counts(rd.Queue("q"), h.now)
		want := PartitionStats{Total: 6, Pending: 3, Processing: 1, Completed: 2, Failed: 1, DeadLetter: 2}
		if c.Totals != want {
			t.Fatalf("totals %+v, want %+v", c.Totals, want)
		}
		wantParts := map[string]PartitionStats{
			"p1": {Total: 3, Pending: 1, Processing: 1, Completed: 1},
			"p2": {Total: 2, Pending: 1, Completed: 1},
			"p3": {Total: 1, Pending: 1, Failed: 1},
		}
		if len(c.Partitions) != len(wantParts) {
			t.Fatalf("%d partitions", len(c.Partitions))
		}
		for i, pc := range c.Partitions {
			if name := []string{"p1", "p2", "p3"}[i]; pc.Partition.Name != name || pc.Stats != wantParts[name] {
				t.Fatalf("partition %d: %s %+v, want %s %+v", i, pc.Partition.Name, pc.Stats, name, wantParts[name])
			}
		}
		if got := rd.OldestCreatedUs(c.Partitions[0].Partition); got != pushedUs {
			t.Fatalf("oldest message of p1 created at %d, want %d", got, pushedUs)
		}
		c2 := rd.Counts(rd.Queue("q2"), h.now)
		if want := (PartitionStats{Total: 1, Completed: 1, DeadLetter: 1}); c2.Totals != want || len(c2.Partitions) != 1 {
			t.Fatalf("q2: %+v over %d partitions, want %+v over 1", c2.Totals, len(c2.Partitions), want)
		}
		// A configured queue has its Default partition, empty.
		ce := rd.Counts(rd.Queue("empty"), h.now)
		if ce.Totals != (PartitionStats{}) || len(ce.Partitions) != 1 || rd.OldestCreatedUs(ce.Partitions[0].Partition) != 0 {
			t.Fatalf("empty queue: %+v over %d partitions", ce.Totals, len(ce.Partitions))
		}
	})
}
