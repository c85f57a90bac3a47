package queue

import (
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
)

// A queue-mode seek moves the pending count both ways, so maxSize keeps
// counting what is really left to deliver.
func TestQueueModeSeekKeepsThePendingCount(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{MaxSize: ptr(int64(3))})
	h.push(item("q", "", "a"), item("q", "", "b"), item("q", "", "c"))
	if r := h.push(item("q", "", "d")); r[0].Status != command.PushItemResult_FAILED {
		t.Fatalf("maxSize 3 took a fourth: %v", r[0].Status)
	}
	h.ackAll(h.popq("q", batch(3)), command.AckStatus_COMPLETED)
	h.push(item("q", "", "d"))
	eq(t, "pending after consuming", queueStats(h, "q").Pending, uint64(1))
	r := h.seek(&command.Seek{Group: command.QueueModeGroup, Queue: "q", TimestampUs: 1})
	eq(t, "partitions", r.PartitionsUpdated, uint32(1))
	eq(t, "pending after seeking back", queueStats(h, "q").Pending, uint64(4))
	if r := h.push(item("q", "", "e")); r[0].Status != command.PushItemResult_FAILED {
		t.Fatal("maxSize ignored the messages a seek made pending again")
	}
	eqList(t, "delivered again", h.txnsOf(h.popq("q", batch(10))), []string{"a", "b", "c", "d"})
	h.advance(time.Hour)
	h.seek(&command.Seek{Group: command.QueueModeGroup, Queue: "q", ToEnd: true})
	eq(t, "pending after seeking to the end", queueStats(h, "q").Pending, uint64(0))
	eq(t, "nothing to deliver", len(h.popq("q").Messages), 0)
}

// Deleting a group with its metadata makes its next pop subscribe afresh;
// without it the subscription stays and only the cursors go.
func TestDeleteGroupAndResubscribe(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "p1", "a"), item("q", "p2", "b"))
	h.ackAll(h.popq("q", group("g"), fromAll(), batch(5), partitions(2)), command.AckStatus_COMPLETED)
	eq(t, "consumed", len(h.popq("q", group("g")).Messages), 0)
	del := func(meta bool) *command.DeleteGroupResult {
		return h.deleteGroup(&command.DeleteGroup{Group: "g", DeleteMetadata: meta})
	}
	r := del(false)
	eq(t, "deleted partitions", r.DeletedPartitions, uint32(2))
	eq(t, "metadata kept", r.MetadataDeleted, false)
	// The subscription (all) is kept: both come again without fromAll.
	eq(t, "again from the kept subscription", len(h.popq("q", group("g"), batch(5), partitions(2)).Messages), 2)
	h.advance(time.Hour)
	r = del(true)
	eq(t, "metadata deleted", r.MetadataDeleted, true)
	// The next pop subscribes afresh: asked for "new" it starts at the tail
	// (with the old "all" subscription kept it would get both again).
	eq(t, "fresh subscription at the tail", len(h.popq("q", group("g"), fromNew(), batch(5), partitions(2)).Messages), 0)
	h.read(func(rd *Reader) {
		if gq := rd.ConsumerGroups("g", h.now); len(gq) != 1 || gq[0].Subscription == nil {
			t.Fatalf("after a fresh pop: %+v", gq)
		}
	})
}

// A position (a transaction's positions, addendum §4.2) sets where a group
// reads a partition next: the group's lease there is released; a missing
// partition is made and a new group registered; a position beyond the end
// is the end; forget sends the group back to its subscription; a queue
// that does not exist is refused, and the transaction keeps nothing.
// (fsm's TestTransactionPositions: positions commit with the rest of a
// transaction.)
func TestPositionsSetWhereAGroupReadsNext(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "p", "m1"), item("q", "p", "m2"), item("q", "p", "m3"), item("q", "p", "m4"))
	held := h.popq("q", group("g"), fromAll(), onPartition("p"), batch(10))
	eq(t, "the group holds the run", len(held.Messages), 4)

	// Rewind g to offset 2.
	ok := h.positions(&command.PositionOp{Queue: "q", ConsumerGroup: "g", Partition: "p", Offset: 2, Metadata: []byte(`{"by":"ops"}`)})
	eq(t, "set", ok, true)
	eqList(t, "g reads from offset 2, its old lease gone", h.txnsOf(h.popq("q", group("g"), onPartition("p"), batch(10))), []string{"m2", "m3", "m4"})
	eq(t, "the old lease acks nothing", h.ack(h.ackOf(held, 3, command.AckStatus_COMPLETED))[0].Success, false)
	h.read(func(rd *Reader) {
		pid := held.Messages[0].PartitionId
		eq(t, "metadata kept", string(rd.Cursor(pid, "g").PositionMetadata), `{"by":"ops"}`)
	})

	// A new group on a new partition: registered, the partition made.
	eq(t, "new partition and group", h.positions(position("q", "fresh", "new-part", 1)), true)
	h.push(item("q", "new-part", "n1"))
	eqList(t, "fresh reads the new partition from its start", h.txnsOf(h.popq("q", group("fresh"), onPartition("new-part"))), []string{"n1"})

	// Beyond the end: at the end.
	eq(t, "beyond the end", h.positions(position("q", "late", "p", 99)), true)
	eq(t, "nothing to read past the end", len(h.popq("q", group("late"), onPartition("p")).Messages), 0)

	// Forget: back to the subscription (fromAll here: everything).
	eq(t, "forget", h.positions(&command.PositionOp{Queue: "q", ConsumerGroup: "late", Partition: "p", Forget: true}), true)
	eqList(t, "late starts over", h.txnsOf(h.popq("q", group("late"), onPartition("p"), fromAll(), batch(10))), []string{"m1", "m2", "m3", "m4"})

	// A queue that does not exist: refused, and nothing of the entry is written.
	before := h.stateHash()
	eq(t, "queue_not_found", h.positions(position("q", "g", "p", 1), position("nope", "g", "", 1)), false)
	eq(t, "nothing written", h.stateHash(), before)
}
