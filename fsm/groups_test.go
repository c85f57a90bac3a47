package fsm

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
)

func (h *harness) seek(in *command.Seek) *command.SeekResult {
	return h.apply(&command.Command{Body: &command.Command_Seek{Seek: in}}).(*command.SeekResult)
}

func queueStats(h *harness, q string) PartitionStats {
	var st PartitionStats
	h.read(func(r *Reader) {
		for _, p := range r.Partitions(q) {
			st.Add(r.Stats(p, h.now))
		}
	})
	return st
}

// A queue-mode seek moves the pending count both ways, so maxSize keeps
// counting what is really left to deliver.
func TestQueueModeSeekKeepsThePendingCount(t *testing.T) {
	h := newHarness(t)
	h.configure("q", &command.QueueOptions{MaxSize: ptr(int64(3))})
	h.push(item("q", "", "a"), item("q", "", "b"), item("q", "", "c"))
	if r := h.push(item("q", "", "d")); r[0].Status != command.PushItemResult_FAILED {
		t.Fatalf("maxSize 3 took a fourth: %v", r[0].Status)
	}
	h.ackAll(h.pop("q", batch(3)), command.AckStatus_COMPLETED)
	h.push(item("q", "", "d"))
	eq(t, "pending after consuming", queueStats(h, "q").Pending, uint64(1))
	r := h.seek(&command.Seek{Group: command.QueueModeGroup, Queue: "q", TimestampUs: 1})
	eq(t, "partitions", r.PartitionsUpdated, uint32(1))
	eq(t, "pending after seeking back", queueStats(h, "q").Pending, uint64(4))
	if r := h.push(item("q", "", "e")); r[0].Status != command.PushItemResult_FAILED {
		t.Fatal("maxSize ignored the messages a seek made pending again")
	}
	eqList(t, "delivered again", h.txns(h.pop("q", batch(10))), []string{"a", "b", "c", "d"})
	h.advance(time.Hour)
	h.seek(&command.Seek{Group: command.QueueModeGroup, Queue: "q", ToEnd: true})
	eq(t, "pending after seeking to the end", queueStats(h, "q").Pending, uint64(0))
	eq(t, "nothing to deliver", len(h.pop("q").Messages), 0)
}

// Deleting a group with its metadata makes its next pop subscribe afresh;
// without it the subscription stays and only the cursors go.
func TestDeleteGroupAndResubscribe(t *testing.T) {
	h := newHarness(t)
	h.push(item("q", "p1", "a"), item("q", "p2", "b"))
	h.ackAll(h.pop("q", group("g"), fromAll(), batch(5), partitions(2)), command.AckStatus_COMPLETED)
	eq(t, "consumed", len(h.pop("q", group("g")).Messages), 0)
	del := func(meta bool) *command.DeleteGroupResult {
		return h.apply(&command.Command{Body: &command.Command_DeleteGroup{DeleteGroup: &command.DeleteGroup{Group: "g", DeleteMetadata: meta}}}).(*command.DeleteGroupResult)
	}
	r := del(false)
	eq(t, "deleted partitions", r.DeletedPartitions, uint32(2))
	eq(t, "metadata kept", r.MetadataDeleted, false)
	// The subscription (all) is kept: both come again without fromAll.
	eq(t, "again from the kept subscription", len(h.pop("q", group("g"), batch(5), partitions(2)).Messages), 2)
	h.advance(time.Hour)
	r = del(true)
	eq(t, "metadata deleted", r.MetadataDeleted, true)
	// The next pop subscribes afresh: asked for "new" it starts at the tail
	// (with the old "all" subscription kept it would get both again).
	eq(t, "fresh subscription at the tail", len(h.pop("q", group("g"), fromNew(), batch(5), partitions(2)).Messages), 0)
	h.read(func(rd *Reader) {
		if gq := rd.ConsumerGroups("g", h.now); len(gq) != 1 || gq[0].Subscription == nil {
			t.Fatalf("after a fresh pop: %+v", gq)
		}
	})
}

// Buffered pushes are appended in order when push maintenance ends; a
// retried push buffered twice is appended once (the dedup window).
func TestPushMaintenanceBuffersThenAppendsInOrder(t *testing.T) {
	h := newHarness(t)
	on, off := true, false
	sw := func(v *bool) {
		h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: v}}})
	}
	drain := func(limit uint32) *command.DrainResult {
		return h.apply(&command.Command{Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{Limit: limit}}}).(*command.DrainResult)
	}
	sw(&on)
	res := h.push(item("q", "", "a"), item("q", "", "b"))
	eq(t, "buffered", res[0].Status, command.PushItemResult_BUFFERED)
	h.push(item("q", "", "a"), item("q", "", "c")) // a retried a
	eq(t, "invisible", len(h.pop("q", group("g"), fromAll()).Messages), 0)
	eq(t, "no drain while on", drain(10).Appended, uint32(0))
	sw(&off)
	// Pushes that come while the buffer drains queue behind it.
	eq(t, "behind the buffer", h.push(item("q", "", "d"))[0].Status, command.PushItemResult_BUFFERED)
	d := drain(2)
	eq(t, "first step", d.Appended, uint32(2))
	eq(t, "left", d.Remaining, uint64(3))
	for drain(2).Remaining > 0 {
	}
	eq(t, "appended now", h.push(item("q", "", "e"))[0].Status, command.PushItemResult_QUEUED)
	eqList(t, "in order, a once", h.txns(h.pop("q", group("g"), fromAll(), batch(10))), []string{"a", "b", "c", "d", "e"})
}

// A node that stops while its disk is full halts apply: the batch is not
// applied (the state's applied index stays, so the entries are applied
// after the restart), and no snapshot claims entries the state lacks.
func TestApplyHaltsWhenTheDiskStaysFull(t *testing.T) {
	h := newHarness(t)
	h.push(item("q", "", "a"))
	before := stateHash(t, h.f)
	applied := h.f.AppliedIndex()
	full := false
	h.f.opts.AwaitSpace = func() bool { return !full }
	full = true
	l := h.entry(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "b")}}}})
	if res := h.f.ApplyBatch([]*raft.Log{l}); res[0] != nil {
		t.Fatalf("a halted FSM answered %v", res[0])
	}
	eq(t, "applied index", h.f.AppliedIndex(), applied)
	eq(t, "state", stateHash(t, h.f), before)
	if _, err := h.f.Snapshot(); err == nil {
		t.Fatal("a halted FSM took a snapshot")
	}
	full = false // halted for the rest of the process, whatever the disk does now
	if res := h.f.ApplyBatch([]*raft.Log{l}); res[0] != nil || h.f.AppliedIndex() != applied {
		t.Fatal("a halted FSM applied again")
	}
}

// maxSize is checked when the buffer takes a push, never when it appends
// it: an item answered "buffered" is never dropped.
func TestBufferedPushesPassMaxSizeWhenAppended(t *testing.T) {
	h := newHarness(t)
	h.configure("q", &command.QueueOptions{MaxSize: ptr(int64(2))})
	on, off := true, false
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: &on}}})
	res := h.push(item("q", "", "a"), item("q", "", "b"), item("q", "", "c"))
	for _, r := range res {
		eq(t, "buffered", r.Status, command.PushItemResult_BUFFERED)
	}
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: &off}}})
	h.apply(&command.Command{Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{Limit: 10}}})
	eqList(t, "all three appended", h.txns(h.pop("q", batch(10))), []string{"a", "b", "c"})
	// Now at maxSize: the buffer refuses at once, as a push would.
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: &on}}})
	eq(t, "refused while full", h.push(item("q", "", "d"))[0].Status, command.PushItemResult_FAILED)
}
