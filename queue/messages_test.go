package queue

import (
	"fmt"
	"slices"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/traces"
)

// find resolves (pid, txn) as the front ends do before a write.
func (h *domain) find(pid []byte, txn string) uint64 {
	var seq uint64
	h.read(func(rd *Reader) { _, seq = rd.FindMessage(pid, txn) })
	return seq
}

func (h *domain) deleteMsg(pid []byte, txn string) bool {
	h.t.Helper()
	seq := h.find(pid, txn)
	if seq == 0 {
		return false
	}
	var res *command.DeleteMessageResult
	h.apply(true, func(tx *Tx) {
		res = tx.DeleteMessage(&command.DeleteMessage{PartitionId: pid, Seq: seq, TransactionId: txn})
	})
	return res.Deleted
}

func (h *domain) replay(in *command.ReplayDeadLetter) *command.ReplayResult {
	h.t.Helper()
	var res *command.ReplayResult
	h.entry(func(tx *Tx) bool {
		res = tx.ReplayDeadLetter(in)
		return res.Verdict == command.ReplayResult_MOVED // as apply does: a refused replay writes nothing
	})
	return res
}

func (h *domain) deadLetters(queue string) []*command.DLQRecord {
	var out []*command.DLQRecord
	h.read(func(rd *Reader) { out, _ = rd.DeadLetters(DLQFilter{Queue: queue, Limit: 100}) })
	return out
}

// deadLetter pops the queue's next message under group and acks it to the
// DLQ; it returns the message's partition id.
func (h *domain) deadLetter(queue, group string) []byte {
	h.t.Helper()
	res := h.pop(&command.Pop{Queue: queue, ConsumerGroup: group, Batch: 1, LeaseId: fmt.Sprint("l", h.index)})
	if len(res.Messages) != 1 {
		h.t.Fatalf("pop for the DLQ: %v", res)
	}
	m := res.Messages[0]
	var txn string
	h.read(func(rd *Reader) { txn = rd.Message(m.PartitionId, m.Seq).TransactionId })
	if r := h.ack(&command.AckItem{TransactionId: txn, PartitionId: m.PartitionId, ConsumerGroup: group,
		LeaseId: res.LeaseId, Status: command.AckStatus_DLQ, Error: "boom", HasError: true}); !r[0].Dlq {
		h.t.Fatalf("ack dlq: %v", r[0])
	}
	return m.PartitionId
}

// A deleted message is never delivered: at the head the group moves past
// it (counted as consumed), inside a run it is left out and pre-acked so
// the run completes, at the tail the next pop moves past it; the dedup
// window no longer counts it; a second delete finds nothing.
func TestDeletedMessagesAreSkipped(t *testing.T) {
	h := newDomain(t, "0")
	res := h.push(item("q", "p", "m1"), item("q", "p", "m2"), item("q", "p", "m3"), item("q", "p", "m4"), item("q", "p", "m5"))
	pid := res[0].PartitionId
	for _, txn := range []string{"m1", "m3", "m5"} {
		if !h.deleteMsg(pid, txn) {
			t.Fatalf("delete %s", txn)
		}
	}
	if h.deleteMsg(pid, "m3") {
		t.Fatal("a second delete found the message")
	}
	if p := h.partRec("q", "p"); p.Deleted != 3 {
		t.Fatalf("tombstones counted %d", p.Deleted)
	}
	h.read(func(rd *Reader) {
		if st := rd.Stats(rd.PartitionByID(pid), h.now); st.Total != 2 || st.Pending != 2 {
			t.Fatalf("stats with tombstones: %+v", st)
		}
	})
	var got []string
	pop := h.pop(&command.Pop{Queue: "q", Batch: 10, LeaseId: "L1"})
	h.read(func(rd *Reader) { got = txns(pop, rd) })
	if !slices.Equal(got, []string{"m2", "m4"}) {
		t.Fatalf("delivered %v", got)
	}
	for _, txn := range got {
		h.ack(&command.AckItem{TransactionId: txn, PartitionId: pid, LeaseId: "L1"})
	}
	h.read(func(rd *Reader) {
		cur := rd.Cursor(pid, command.QueueModeGroup)
		if cur.Consumed != 4 || cur.Lease != nil {
			t.Fatalf("after the run: %+v", cur)
		}
	})
	if again := h.pop(&command.Pop{Queue: "q", Batch: 10, LeaseId: "L2"}); len(again.Messages) != 0 {
		t.Fatalf("a deleted tail was delivered: %v", again)
	}
	h.read(func(rd *Reader) {
		if c := rd.Cursor(pid, command.QueueModeGroup).Consumed; c != 5 {
			t.Fatalf("the pop did not move past the deleted tail: %d", c)
		}
		if q := rd.Queue("q"); q.Pending != 0 {
			t.Fatalf("pending %d", q.Pending)
		}
		if rd.MessageDetail(pid, "m3", h.now) != nil {
			t.Fatal("a deleted message is still shown")
		}
	})
	if r := h.push(item("q", "p", "m1")); r[0].Status != command.PushItemResult_QUEUED {
		t.Fatalf("the window still counts a deleted message: %v", r[0])
	}
}

// Retention removes tombstones with the prefix they are in.
func TestRetentionRemovesTombstones(t *testing.T) {
	h := newDomain(t, "0")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(10))})
	res := h.push(item("q", "p", "a"), item("q", "p", "b"))
	pid := res[0].PartitionId
	h.deleteMsg(pid, "a")
	h.now += 11 * sec
	h.push(item("q", "p", "c"))
	h.retain(0)
	if p := h.partRec("q", "p"); p.Deleted != 0 || p.FirstSeq != 3 {
		t.Fatalf("after retention: %+v", p)
	}
	h.read(func(rd *Reader) {
		c := rd.r.Cursor(bDeleted)
		if k, _ := c.First(); k != nil {
			t.Fatalf("a tombstone is left: %x", k)
		}
	})
}

// A replay is ONE entry that appends a new message carrying dlq:<id> and
// removes the record; a second replay of the id is gone; a replay the
// dedup window refuses writes nothing and keeps the record.
func TestReplayMovesTheRecordOnce(t *testing.T) {
	h := newDomain(t, "0")
	h.push(item("q", "p", "t1"))
	h.deadLetter("q", "")
	dls := h.deadLetters("q")
	if len(dls) != 1 || len(dls[0].RecordId) != 20 {
		t.Fatalf("dead letters %v", dls)
	}
	id := dls[0].RecordId
	res := h.replay(&command.ReplayDeadLetter{RecordId: id, SourceQueue: "q", MessageId: make([]byte, 16)})
	if res.Verdict != command.ReplayResult_MOVED || res.TransactionId != "dlq:"+DeadLetterID(id) || res.Partition != "p" {
		t.Fatalf("replay: %v", res)
	}
	if len(h.deadLetters("q")) != 0 {
		t.Fatal("the record stayed")
	}
	h.read(func(rd *Reader) {
		if q := rd.Queue("q"); q.DlqCount != 0 {
			t.Fatalf("dlq count %d", q.DlqCount)
		}
		if m := rd.Message(res.PartitionId, res.Offset); m == nil || string(m.Payload) != `{"txn":"t1"}` {
			t.Fatalf("the replayed message: %v", m)
		}
	})
	if again := h.replay(&command.ReplayDeadLetter{RecordId: id, SourceQueue: "q"}); again.Verdict != command.ReplayResult_GONE {
		t.Fatalf("second replay: %v", again)
	}
	// A record whose dlq:<id> the destination's window already holds.
	h.push(item("q", "p", "t2"))
	pop := h.popAck("q", "", 1) // t1 (the replay)
	if !slices.Equal(pop, []string{"dlq:" + DeadLetterID(id)}) {
		t.Fatalf("the replay was not delivered next: %v", pop)
	}
	h.deadLetter("q", "")
	id2 := h.deadLetters("q")[0].RecordId
	h.push(item("other", "x", "dlq:"+DeadLetterID(id2)))
	dup := h.replay(&command.ReplayDeadLetter{RecordId: id2, SourceQueue: "q", Queue: "other", Partition: "x"})
	if dup.Verdict != command.ReplayResult_DUPLICATE || len(h.deadLetters("q")) != 1 {
		t.Fatalf("duplicate: %v, records %d", dup, len(h.deadLetters("q")))
	}
	// The front end read another queue: answered as gone, nothing moved.
	if wrong := h.replay(&command.ReplayDeadLetter{RecordId: id2, SourceQueue: "elsewhere"}); wrong.Verdict != command.ReplayResult_GONE {
		t.Fatalf("a replay naming another source queue: %v", wrong)
	}
}

// Two groups dead-letter the same message: the replay of one group's
// record is a new message every group receives; the other group's record
// stays. The retry by message addresses a group's record (queue mode by
// default).
func TestReplayOfOneGroupsRecord(t *testing.T) {
	h := newDomain(t, "0")
	res := h.push(item("q", "p", "t1"))
	pid := res[0].PartitionId
	h.apply(true, func(tx *Tx) {
		tx.Pop(&command.Pop{Queue: "q", ConsumerGroup: "a", Subscription: command.Pop_DEFAULT_ALL, Batch: 0, LeaseId: "x"}, true, GroupPolicy)
	})
	h.deadLetter("q", "a")
	h.deadLetter("q", "b")
	if n := len(h.deadLetters("q")); n != 2 {
		t.Fatalf("%d records", n)
	}
	if r := h.replay(&command.ReplayDeadLetter{PartitionId: pid, TransactionId: "t1", SourceQueue: "q"}); r.Verdict != command.ReplayResult_GONE {
		t.Fatalf("queue mode has no record, yet: %v", r)
	}
	r := h.replay(&command.ReplayDeadLetter{PartitionId: pid, TransactionId: "t1", ConsumerGroup: "a", SourceQueue: "q"})
	if r.Verdict != command.ReplayResult_MOVED || r.ConsumerGroup != "a" {
		t.Fatalf("retry of a's record: %v", r)
	}
	left := h.deadLetters("q")
	if len(left) != 1 || left[0].ConsumerGroup != "b" {
		t.Fatalf("left %v", left)
	}
	for _, g := range []string{"a", "b", ""} {
		if got := h.popAck("q", g, 10); !slices.Contains(got, r.TransactionId) {
			t.Fatalf("group %q did not receive the replay: %v", g, got)
		}
	}
}

// A purge names one queue, and optionally one group.
func TestPurgeOneGroup(t *testing.T) {
	h := newDomain(t, "0")
	h.push(item("q", "p", "t1"), item("q", "p", "t2"))
	h.deadLetter("q", "a")
	h.deadLetter("q", "a")
	h.deadLetter("q", "b")
	var res *command.PurgeResult
	h.apply(true, func(tx *Tx) {
		res = tx.PurgeDeadLetters(&command.PurgeDeadLetters{Queue: "q", ConsumerGroup: "a", Limit: 1})
	})
	if res.Purged != 1 || !res.More {
		t.Fatalf("first step %v", res)
	}
	h.apply(true, func(tx *Tx) {
		res = tx.PurgeDeadLetters(&command.PurgeDeadLetters{Queue: "q", ConsumerGroup: "a", Limit: 1})
	})
	left := h.deadLetters("q")
	if res.Purged != 1 || res.More || len(left) != 1 || left[0].ConsumerGroup != "b" {
		t.Fatalf("second step %v, left %v", res, left)
	}
	h.read(func(rd *Reader) {
		if q := rd.Queue("q"); q.DlqCount != 1 {
			t.Fatalf("dlq count %d", q.DlqCount)
		}
		if n := countKeys(rd.r, bDLQMsg); n != 1 {
			t.Fatalf("%d message index entries", n)
		}
	})
}

func countKeys(r store.Reader, b store.Bucket) int {
	n := 0
	c := r.Cursor(b)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

func (h *domain) trace(pid []byte, txn string, names ...string) bool {
	h.t.Helper()
	seq := h.find(pid, txn)
	var res *command.TraceResult
	h.apply(true, func(tx *Tx) {
		res = tx.RecordTrace(&command.RecordTrace{PartitionId: pid, Seq: seq, TransactionId: txn, TraceNames: names,
			EventType: "info", Data: []byte(`{}`), TraceId: make([]byte, 16)})
	})
	return res.Found
}

// Traces live as long as their message: deleting it, retention and the
// deletion of its queue remove them, and the views count what is left.
func TestTracesGoWithTheirMessage(t *testing.T) {
	h := newDomain(t, "0")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(10))})
	res := h.push(item("q", "p", "a"), item("q", "p", "b"), item("q", "p", "c"))
	pid := res[0].PartitionId
	if h.trace(pid, "nope", "x") {
		t.Fatal("a trace of no message was recorded")
	}
	h.trace(pid, "a", "order", "order")
	h.trace(pid, "a", "order")
	h.trace(pid, "b", "order", "pay")
	h.now += 11 * sec
	h.push(item("q", "p", "d"))
	h.trace(pid, "d", "pay")
	h.read(func(rd *Reader) {
		names := rd.TraceNames(nil)
		if len(names) != 2 || names[0].Name != "order" || names[0].Traces != 3 || names[0].Messages != 2 || names[1].Traces != 2 {
			t.Fatalf("names %+v", names)
		}
		if rows, total := rd.TracesByName("pay", nil, 0, 10); total != 2 || rows[0].TransactionId != "d" {
			t.Fatalf("by name: %d %v", total, rows)
		}
	})
	h.deleteMsg(pid, "d")
	h.retain(0) // a, b, c are older than 10 s
	h.read(func(rd *Reader) {
		if n := countKeys(rd.r, traces.Buckets[0]) + countKeys(rd.r, traces.Buckets[1]); n != 0 {
			t.Fatalf("%d trace keys left", n)
		}
	})
	// Queue deletion: the graveyard sweep takes them.
	res = h.push(item("r", "p", "z"))
	h.trace(res[0].PartitionId, "z", "gone")
	h.apply(true, func(tx *Tx) { tx.DeleteQueue("r") })
	h.read(func(rd *Reader) {
		if names := rd.TraceNames(nil); len(names) != 0 {
			t.Fatalf("a deleted queue's traces are shown: %v", names)
		}
	})
	for more := true; more; {
		h.apply(true, func(tx *Tx) { _, more = tx.SweepGraveyard(1) })
	}
	h.read(func(rd *Reader) {
		if n := countKeys(rd.r, traces.Buckets[0]); n != 0 {
			t.Fatalf("%d traces of a deleted queue left", n)
		}
	})
}

// The list's statuses: queue mode (pending, processing, completed),
// dead_letter over everything, and bus mode (completed when every group
// consumed the message).
func TestMessageStatuses(t *testing.T) {
	h := newDomain(t, "0")
	res := h.push(item("q", "p", "a"), item("q", "p", "b"), item("q", "p", "c"), item("q", "p", "d"))
	pid := res[0].PartitionId
	h.popAck("q", "", 1)                                    // a completed
	h.deadLetter("q", "")                                   // b dead_letter
	h.pop(&command.Pop{Queue: "q", Batch: 1, LeaseId: "L"}) // c processing
	status := func() map[string]string {
		out := map[string]string{}
		h.read(func(rd *Reader) {
			rows, _ := rd.ListMessages(MessageFilter{Limit: 10, FromUs: 1}, h.now)
			for _, r := range rows {
				out[r.Message.TransactionId] = r.Status
			}
		})
		return out
	}
	want := map[string]string{"a": "completed", "b": "dead_letter", "c": "processing", "d": "pending"}
	if got := status(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue mode: %v", got)
	}
	h.read(func(rd *Reader) {
		rows, mode := rd.ListMessages(MessageFilter{Limit: 2, Offset: 1, FromUs: 1}, h.now)
		if len(rows) != 2 || rows[0].Message.TransactionId != "c" || !mode.HasQueueMode || mode.BusGroups != 0 {
			t.Fatalf("page: %v %+v", rows, mode)
		}
		rows, _ = rd.ListMessages(MessageFilter{Limit: 10, FromUs: 1, Status: StatusDeadLetter}, h.now)
		if len(rows) != 1 || rows[0].Message.TransactionId != "b" || len(rows[0].DeadLetters) != 1 {
			t.Fatalf("dead letters: %v", rows)
		}
		d := rd.MessageDetail(pid, "b", h.now)
		if d == nil || d.Status != StatusDeadLetter || d.DeadLetters[0].Error != "boom" {
			t.Fatalf("detail %+v", d)
		}
	})
	// Bus mode only.
	res = h.push(item("bus", "p", "x"), item("bus", "p", "y"))
	for _, g := range []string{"g1", "g2"} {
		h.apply(true, func(tx *Tx) {
			tx.Pop(&command.Pop{Queue: "bus", ConsumerGroup: g, Subscription: command.Pop_DEFAULT_ALL, Batch: 1, LeaseId: "b" + g}, false, GroupPolicy)
		})
	}
	h.read(func(rd *Reader) {
		cur := rd.Cursor(res[0].PartitionId, "g1")
		if !leases.Live(cur.Lease, h.now) {
			t.Fatal("no lease")
		}
	})
	h.ack(&command.AckItem{TransactionId: "x", PartitionId: res[0].PartitionId, ConsumerGroup: "g1", LeaseId: "bg1"})
	h.read(func(rd *Reader) {
		rows, mode := rd.ListMessages(MessageFilter{Queue: "bus", Limit: 10, FromUs: 1}, h.now)
		got := map[string]string{}
		for _, r := range rows {
			got[r.Message.TransactionId] = fmt.Sprint(r.Status, r.ConsumedBy, "/", r.TotalGroups)
		}
		if got["x"] != "processing1/2" || got["y"] != "pending0/2" || mode.BusGroups != 2 || mode.HasQueueMode {
			t.Fatalf("bus: %v %+v", got, mode)
		}
	})
	h.ack(&command.AckItem{TransactionId: "x", PartitionId: res[0].PartitionId, ConsumerGroup: "g2", LeaseId: "bg2"})
	h.read(func(rd *Reader) {
		if d := rd.MessageDetail(res[0].PartitionId, "x", h.now); d.Status != StatusCompleted {
			t.Fatalf("consumed by both: %s", d.Status)
		}
	})
}

// A group's lag and the depth view count live messages only: one deleted
// at the head, in the middle or at the tail is nobody's work, before any
// pop passes it.
func TestLagCountsLiveMessages(t *testing.T) {
	h := newDomain(t, "0")
	res := h.push(item("q", "p", "m1"), item("q", "p", "m2"), item("q", "p", "m3"), item("q", "p", "m4"), item("q", "p", "m5"))
	pid := res[0].PartitionId
	h.popq("q", group("g")) // the group's cursor: m1 under a lease
	for _, txn := range []string{"m2", "m3", "m5"} {
		if !h.deleteMsg(pid, txn) {
			t.Fatalf("delete %s", txn)
		}
	}
	var gp GroupPartition
	var d Depth
	h.read(func(rd *Reader) {
		gq := rd.ConsumerGroups("g", h.now)
		if len(gq) != 1 || len(gq[0].Partitions) != 1 {
			t.Fatalf("groups: %+v", gq)
		}
		gp = gq[0].Partitions[0]
		d, _ = rd.Depth("q", "g", h.now)
	})
	if gp.Pending != 2 { // m1 (leased) and m4
		t.Fatalf("pending %d, want 2 (m1, m4): %+v", gp.Pending, gp)
	}
	if d.Pending != 2 || d.Processing != 1 {
		t.Fatalf("depth %+v, want pending 2, processing 1", d)
	}
	if !h.deleteMsg(pid, "m1") {
		t.Fatal("delete m1")
	}
	var first int64
	h.read(func(rd *Reader) {
		gp = rd.ConsumerGroups("g", h.now)[0].Partitions[0]
		e, err := rd.msgs.Entry(pid, 4)
		if err != nil {
			t.Fatal(err)
		}
		first = e.CreatedUs
	})
	if gp.Pending != 1 || gp.OldestPendingUs != first {
		t.Fatalf("after deleting m1: pending %d oldest %d, want 1 and m4's createdAt %d", gp.Pending, gp.OldestPendingUs, first)
	}
}
