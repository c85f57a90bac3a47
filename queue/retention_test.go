package queue

import (
	"fmt"
	"testing"

	"github.com/queen-node/queen-node/command"
)

const sec = int64(1e6)

func (h *domain) configure(queue string, o *command.QueueOptions) {
	h.t.Helper()
	h.apply(true, func(tx *Tx) { tx.Configure(&command.Configure{Queue: queue, Options: o}) })
}

// retain runs a whole pass, entry after entry, as the leader does.
func (h *domain) retain(idleUs int64) *command.RetainCount {
	h.t.Helper()
	total := &command.RetainCount{}
	var after []byte
	for {
		var res *command.RetainResult
		h.apply(true, func(tx *Tx) { res = tx.Retain(&command.Retain{After: after, Limit: 2, PartitionIdleUs: idleUs}) })
		for _, c := range res.Queues {
			total.Retention += c.Retention
			total.Completed += c.Completed
			total.Evicted += c.Evicted
			total.ExpiredWith += c.ExpiredWith
			total.DeadLetters += c.DeadLetters
			total.Skipped += c.Skipped
			total.Partitions += c.Partitions
		}
		if len(res.Next) == 0 {
			return total
		}
		after = res.Next
	}
}

func (h *domain) pushN(queue, partition, prefix string, n int) {
	h.t.Helper()
	var items []*command.PushItem
	for i := 0; i < n; i++ {
		items = append(items, item(queue, partition, fmt.Sprintf("%s-%d", prefix, i)))
	}
	for _, r := range h.push(items...) {
		if r.Status != command.PushItemResult_QUEUED {
			h.t.Fatalf("push: %v", r)
		}
	}
}

func (h *domain) partRec(queue, partition string) *command.PartitionRecord {
	var p *command.PartitionRecord
	h.read(func(rd *Reader) {
		for _, x := range rd.Partitions(queue) {
			if x.Name == partition {
				p = x
			}
		}
	})
	return p
}

func (h *domain) popAck(queue, group string, batch uint32) []string {
	h.t.Helper()
	res := h.pop(&command.Pop{Queue: queue, ConsumerGroup: group, Batch: batch, LeaseId: fmt.Sprint("l", h.index)})
	var names []string
	var items []*command.AckItem
	h.read(func(rd *Reader) { names = txns(res, rd) })
	for i, m := range res.Messages {
		items = append(items, &command.AckItem{TransactionId: names[i], PartitionId: m.PartitionId, ConsumerGroup: group})
	}
	if len(items) > 0 {
		h.ack(items...)
	}
	return names
}

// retentionSeconds removes what is older, whatever its state: the cursor
// that had not got there skips, counted; the files of the removed messages
// go; what is younger stays deliverable.
func TestRetentionRemovesOldMessagesAndTheirFiles(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(8))})
	for i := 0; i < 4; i++ { // 4 batches 3 s apart: the segments roll by time (8 s / 4)
		h.pushN("q", "p", fmt.Sprint("b", i), 20)
		h.now += 3 * sec
	}
	if got := h.popAck("q", "", 5); len(got) != 5 {
		t.Fatalf("first pop: %v", got)
	}
	sizeBefore := h.msgs.Size()
	// Now batch 0 is 12 s old, batch 1 9 s, batch 2 6 s: two batches go.
	c := h.retain(0)
	if c.Retention != 40 || c.Skipped != 35 {
		t.Fatalf("removed %d (want 40), skipped %d (want 35)", c.Retention, c.Skipped)
	}
	p := h.partRec("q", "p")
	if p.FirstSeq != 41 || p.Count != 40 {
		t.Fatalf("partition after retention: first %d count %d", p.FirstSeq, p.Count)
	}
	if h.msgs.Size() >= sizeBefore {
		t.Fatalf("message files %d -> %d bytes: the space did not come back", sizeBefore, h.msgs.Size())
	}
	var q *command.QueueRecord
	h.read(func(rd *Reader) { q = rd.Queue("q") })
	if q.Pending != 40 {
		t.Fatalf("pending %d, want 40", q.Pending)
	}
	got := h.popAck("q", "", 1)
	if len(got) != 1 || got[0] != "b2-0" {
		t.Fatalf("after retention the group goes on at the oldest left: %v", got)
	}
	var cur *command.CursorRecord
	h.read(func(rd *Reader) { cur = rd.Cursor(p.Id, command.QueueModeGroup) })
	if cur.Skipped != 35 {
		t.Fatalf("cursor skipped %d", cur.Skipped)
	}
	if again := h.retain(0); again.Retention != 0 {
		t.Fatalf("a second pass removed %d", again.Retention)
	}
}

// completedRetentionSeconds waits for every group, including one that has
// subscribed but not popped this partition yet.
func TestCompletedRetentionWaitsForEveryGroup(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), CompletedRetentionSeconds: ptr(int64(5))})
	h.pushN("q", "p", "m", 10)
	h.popAck("q", "fast", 8)
	h.popAck("q", "slow", 3)
	h.now += 6 * sec
	if c := h.retain(0); c.Completed != 3 || c.Skipped != 0 {
		t.Fatalf("completed %d (want 3: what slow consumed), skipped %d", c.Completed, c.Skipped)
	}
	h.popAck("q", "slow", 10)
	if c := h.retain(0); c.Completed != 5 {
		t.Fatalf("then %d (want 5: up to fast's 8)", c.Completed)
	}
	// No group at all: nothing is completed.
	h.pushN("q", "other", "o", 3)
	h.now += 6 * sec
	for _, g := range []string{"fast", "slow", "fast", "slow"} { // one partition per pop
		h.popAck("q", g, 100)
	}
	h.retain(0)
	if p := h.partRec("q", "p"); p.FirstSeq != 11 || p.Count != 0 {
		t.Fatalf("before: %v", p)
	}
	h.configure("q2", &command.QueueOptions{RetentionEnabled: ptr(true), CompletedRetentionSeconds: ptr(int64(1))})
	h.pushN("q2", "p", "x", 3)
	h.now += 2 * sec
	h.retain(0)
	if p := h.partRec("q2", "p"); p.FirstSeq != 1 {
		t.Fatalf("a queue nobody consumed lost messages: %v", p)
	}
}

// maxWaitTimeSeconds: unconsumed messages older than N are skipped by each
// group without a live lease (not dead-lettered) and then removed.
func TestMaxWaitEvictsUnconsumedMessages(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{MaxWaitTimeSeconds: ptr(int64(10))})
	h.pushN("q", "p", "old", 6)
	h.popAck("q", "", 2)
	h.now += 11 * sec
	h.pushN("q", "p", "new", 2)
	c := h.retain(0)
	if c.Evicted != 4 || c.ExpiredWith != 6 {
		t.Fatalf("evicted %d (want 4), removed %d (want 6: those and the 2 consumed)", c.Evicted, c.ExpiredWith)
	}
	if got := h.popAck("q", "", 10); len(got) != 2 || got[0] != "new-0" {
		t.Fatalf("after eviction: %v", got)
	}
	var dlq int
	h.read(func(rd *Reader) { _, dlq = rd.DeadLetters(DLQFilter{Queue: "q"}) })
	if dlq != 0 {
		t.Fatalf("evicted messages went to the DLQ: %d", dlq)
	}
	// A group holding a live lease keeps its messages this pass.
	h.pushN("q", "p", "held", 3)
	h.pop(&command.Pop{Queue: "q", Batch: 1, LeaseId: "L"})
	h.now += 11 * sec
	if c := h.retain(0); c.Evicted != 0 {
		t.Fatalf("evicted %d under a live lease", c.Evicted)
	}
	// Nobody consumes the queue at all: old messages go outright.
	h.configure("q3", &command.QueueOptions{MaxWaitTimeSeconds: ptr(int64(1))})
	h.pushN("q3", "p", "x", 4)
	h.now += 2 * sec
	if c := h.retain(0); c.Evicted != 4 || c.ExpiredWith != 4 {
		t.Fatalf("q3 evicted %d, removed %d", c.Evicted, c.ExpiredWith)
	}
}

// The dedup window bounds deduplication, never identity: after it a
// transactionId is queued again, and an ack of it settles the one the
// group has not consumed.
func TestDedupWindow(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{DedupWindowSeconds: ptr(int64(60))})
	first := h.push(item("q", "p", "order-1"), item("q", "p", "order-1"))
	if first[0].Status != command.PushItemResult_QUEUED || first[1].Status != command.PushItemResult_DUPLICATE ||
		first[1].Offset != first[0].Offset {
		t.Fatalf("within one call: %v", first)
	}
	h.now += 59 * sec
	if r := h.push(item("q", "p", "order-1"))[0]; r.Status != command.PushItemResult_DUPLICATE || r.Offset != 1 {
		t.Fatalf("inside the window: %v", r)
	}
	h.popAck("q", "", 1) // consumes seq 1
	h.now += 2 * sec
	r := h.push(item("q", "p", "order-1"))[0]
	if r.Status != command.PushItemResult_QUEUED || r.Offset != 2 {
		t.Fatalf("after the window: %v", r)
	}
	p := h.partRec("q", "p")
	res := h.ack(&command.AckItem{TransactionId: "order-1", PartitionId: p.Id})
	if !res[0].Success || res[0].Noop {
		t.Fatalf("an ack of the id now names the unconsumed one: %v", res[0])
	}
	var cur *command.CursorRecord
	h.read(func(rd *Reader) { cur = rd.Cursor(p.Id, command.QueueModeGroup) })
	if cur.Consumed != 2 {
		t.Fatalf("consumed %d", cur.Consumed)
	}
	// Window 0: no dedup at all.
	h.configure("off", &command.QueueOptions{DedupWindowSeconds: ptr(int64(0))})
	rs := h.push(item("off", "p", "x"), item("off", "p", "x"))
	if rs[1].Status != command.PushItemResult_QUEUED {
		t.Fatalf("window 0 deduplicated: %v", rs[1])
	}
	// A queue that never set a window has the default hour.
	rs = h.push(item("implicit", "p", "y"))
	h.now += 3599 * sec
	if r := h.push(item("implicit", "p", "y"))[0]; r.Status != command.PushItemResult_DUPLICATE {
		t.Fatalf("default window: %v", r)
	}
}

// Retention removes messages, not their dedup (addendum §4.6: the window
// bounds it): a removed message's transactionId is a duplicate, answered
// with the original messageId and offset, as long as it was created within
// the window, also after the index is built again from the state (a
// restart); its record and slot go once the window has passed, so memory
// follows what the window holds.
func TestRetentionKeepsDedupWithinTheWindow(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(4)), DedupWindowSeconds: ptr(int64(8))})
	original := h.push(item("q", "p", "first"))[0]
	for i := 0; i < 10; i++ {
		h.pushN("q", "p", fmt.Sprint("b", i), 50)
		h.now += 1 * sec
		h.retain(0)
	}
	p := h.partRec("q", "p")
	if p.FirstSeq <= 1 || p.Count > 250 {
		t.Fatalf("retention kept %d from seq %d", p.Count, p.FirstSeq)
	}
	windowHolds := func() int {
		var n int
		h.read(func(rd *Reader) {
			c := rd.r.Cursor(bDedupGone)
			for k, _ := c.Seek(p.Id); k != nil && hasPrefix(k, p.Id); k, _ = c.Next() {
				n++
			}
		})
		return n + int(p.Count)
	}
	// b3-0 was pushed 7 s ago and removed 3 s ago: still in the window.
	r := h.push(item("q", "p", "b3-0"))[0]
	if r.Status != command.PushItemResult_DUPLICATE || r.Offset >= p.FirstSeq {
		t.Fatalf("a removed message within the window: %v, want a duplicate of its removed offset", r)
	}
	h.d.dedup = newDedupIndex() // as after a restart: built again from the state
	again := h.push(item("q", "p", "b3-0"))[0]
	if again.Status != command.PushItemResult_DUPLICATE || again.Offset != r.Offset || string(again.MessageId) != string(r.MessageId) {
		t.Fatalf("after the index is built again: %v, want %v", again, r)
	}
	// "first" and b0 were created more than 8 s ago: out of the window.
	if r := h.push(item("q", "p", "b0-1"))[0]; r.Status != command.PushItemResult_QUEUED {
		t.Fatalf("a removed message out of the window: %v", r)
	}
	if r := h.push(item("q", "p", "first"))[0]; r.Status != command.PushItemResult_QUEUED || r.Offset == original.Offset {
		t.Fatalf("%v", r)
	}
	h.retain(0)
	p = h.partRec("q", "p")
	if part := h.d.dedup.parts[string(p.Id)]; part == nil || part.seqs.len() != windowHolds() {
		t.Fatalf("dedup index of %d slots for %d stored and removed within the window", part.seqs.len(), windowHolds())
	}
	h.now += 9 * sec
	h.retain(0)
	p = h.partRec("q", "p")
	if n := windowHolds(); n != int(p.Count) {
		t.Fatalf("%d records of removed messages left after the window passed", n-int(p.Count))
	}
	if part := h.d.dedup.parts[string(p.Id)]; part != nil && part.seqs.len() > int(p.Count) {
		t.Fatalf("dedup index of %d slots for %d stored", part.seqs.len(), p.Count)
	}
}

// An empty partition idle for the clean-up time goes with its cursors; a
// push to its name makes a new one with a new id.
func TestIdlePartitionsAreCleanedUp(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(5))})
	h.pushN("q", "p", "m", 3)
	h.popAck("q", "", 3)
	old := h.partRec("q", "p")
	h.now += 6 * sec
	if c := h.retain(10 * sec); c.Retention != 3 || c.Partitions != 0 {
		t.Fatalf("first pass: %v", c)
	}
	h.now += 5 * sec
	if c := h.retain(10 * sec); c.Partitions != 2 { // p and Default
		t.Fatalf("idle partitions removed: %d", c.Partitions)
	}
	if p := h.partRec("q", "p"); p != nil {
		t.Fatalf("partition still there: %v", p)
	}
	var cur *command.CursorRecord
	h.read(func(rd *Reader) { cur = rd.Cursor(old.Id, command.QueueModeGroup) })
	if cur != nil && cur.Consumed != 0 {
		t.Fatalf("the cursor stayed: %v", cur)
	}
	h.pushN("q", "p", "again", 1)
	if p := h.partRec("q", "p"); p == nil || string(p.Id) == string(old.Id) || p.NextSeq != 2 {
		t.Fatalf("the new partition: %v (old id %x)", p, old.Id)
	}
	if got := h.popAck("q", "", 5); len(got) != 1 || got[0] != "again-0" {
		t.Fatalf("after clean-up: %v", got)
	}
}

// Dead letters go by failure time under the queue's retention.
func TestRetentionExpiresDeadLetters(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(30))})
	h.pushN("q", "p", "m", 2)
	res := h.pop(&command.Pop{Queue: "q", Batch: 2, LeaseId: "L"})
	h.ack(&command.AckItem{TransactionId: "m-0", PartitionId: res.Messages[0].PartitionId, Status: command.AckStatus_DLQ},
		&command.AckItem{TransactionId: "m-1", PartitionId: res.Messages[0].PartitionId, Status: command.AckStatus_DLQ})
	h.now += 31 * sec
	if c := h.retain(0); c.DeadLetters != 2 {
		t.Fatalf("dead letters removed: %d", c.DeadLetters)
	}
	var n int
	h.read(func(rd *Reader) { _, n = rd.DeadLetters(DLQFilter{Queue: "q"}) })
	var q *command.QueueRecord
	h.read(func(rd *Reader) { q = rd.Queue("q") })
	if n != 0 || q.DlqCount != 0 {
		t.Fatalf("dlq %d, count %d", n, q.DlqCount)
	}
}

// Completed retention under a live lease whose run is half acked removes
// the acked part and leaves the lease alone: the rest of the run is acked
// under it (the soak found a release here).
func TestCompletedRetentionKeepsALiveLease(t *testing.T) {
	h := newDomain(t, "log")
	h.configure("q", &command.QueueOptions{RetentionEnabled: ptr(true), CompletedRetentionSeconds: ptr(int64(5))})
	h.pushN("q", "p", "m", 6)
	res := h.pop(&command.Pop{Queue: "q", Batch: 6, LeaseId: "L"})
	pid := res.Messages[0].PartitionId
	for _, txn := range []string{"m-0", "m-1", "m-2"} {
		if r := h.ack(&command.AckItem{TransactionId: txn, PartitionId: pid, LeaseId: "L"})[0]; !r.Success {
			t.Fatalf("ack %s: %v", txn, r)
		}
	}
	h.now += 6 * sec
	if c := h.retain(0); c.Completed != 3 || c.Skipped != 0 {
		t.Fatalf("completed %d skipped %d", c.Completed, c.Skipped)
	}
	for _, txn := range []string{"m-3", "m-4", "m-5"} {
		if r := h.ack(&command.AckItem{TransactionId: txn, PartitionId: pid, LeaseId: "L"})[0]; !r.Success || r.Error != "" {
			t.Fatalf("ack %s under the lease after retention: %v", txn, r)
		}
	}
	var cur *command.CursorRecord
	h.read(func(rd *Reader) { cur = rd.Cursor(pid, command.QueueModeGroup) })
	if cur.Consumed != 6 || cur.Lease != nil {
		t.Fatalf("cursor %v", cur)
	}
}

// The dedup index holds the window, not the history; an old message is
// still acked (under its lease, as the group's next, or again under the
// lease that consumed it), in a queue with a window and in one without.
func TestDedupIndexHoldsTheWindowOnly(t *testing.T) {
	for _, window := range []int64{10, 0} {
		h := newDomain(t, "log")
		q := fmt.Sprint("w", window)
		h.configure(q, &command.QueueOptions{DedupWindowSeconds: ptr(window)})
		for i := 0; i < 60; i++ { // 60 batches a second apart
			h.pushN(q, "p", fmt.Sprint("b", i), 20)
			h.now += sec
		}
		p := h.partRec(q, "p")
		part := h.d.dedup.parts[string(p.Id)]
		if window == 0 && part != nil {
			t.Fatalf("window 0 built an index of %d", part.seqs.len())
		}
		if window > 0 && (part == nil || part.seqs.len() > 20*12) {
			t.Fatalf("window %d s: the index holds %d of %d messages", window, part.seqs.len(), p.Count)
		}
		// b0-* are 60 s old: outside any window, still acked.
		res := h.pop(&command.Pop{Queue: q, Batch: 5, LeaseId: "L1"})
		pid := res.Messages[0].PartitionId
		for i := 0; i < 5; i++ {
			r := h.ack(&command.AckItem{TransactionId: fmt.Sprint("b0-", i), PartitionId: pid, LeaseId: "L1"})[0]
			if !r.Success || r.Error != "" || r.Noop {
				t.Fatalf("window %d: ack of b0-%d under its lease: %v", window, i, r)
			}
		}
		if r := h.ack(&command.AckItem{TransactionId: "b0-4", PartitionId: pid, LeaseId: "L1"})[0]; !r.Success || !r.Noop {
			t.Fatalf("window %d: a retried ack under the released lease: %v", window, r)
		}
		if r := h.ack(&command.AckItem{TransactionId: "b0-5", PartitionId: pid})[0]; !r.Success || r.Noop {
			t.Fatalf("window %d: an unleased ack of the next message: %v", window, r)
		}
		if r := h.ack(&command.AckItem{TransactionId: "nope", PartitionId: pid})[0]; r.Error != errMessageNotFound {
			t.Fatalf("window %d: an unknown id: %v", window, r)
		}
	}
}
