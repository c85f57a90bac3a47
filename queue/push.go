package queue

import (
	"fmt"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
)

// Push appends one message to its partition, creating the queue and the
// partition on first use, unless the partition already holds a message with
// the same transactionId created within the queue's dedup window: then
// nothing is written and the result names the original message (spec §4.2,
// §5.8, addendum §4.6). A queue at maxSize refuses the item
// (spec §5.11).
func (t *Tx) Push(it *command.PushItem) *command.PushItemResult { return t.push(it, true) }

// full says why a queue at maxSize refuses a push ("" when it takes it).
func full(qs *queueState) string {
	if max := qs.rec.Options.GetMaxSize(); max > 0 && qs.rec.Pending >= uint64(max) {
		return fmt.Sprintf("queue %s is at max capacity (%d pending, maxSize %d)", qs.rec.Name, qs.rec.Pending, max)
	}
	return ""
}

// push is Push; checkSize false appends past maxSize (a push the buffer of
// push maintenance already accepted).
func (t *Tx) push(it *command.PushItem, checkSize bool) *command.PushItemResult {
	r := &command.PushItemResult{TransactionId: it.TransactionId, Queue: it.Queue, TraceId: it.TraceId}
	qs := t.ensureQueue(it.Queue)
	ps := t.ensurePartition(it.Queue, it.Partition)
	r.PartitionId = ps.rec.Id
	window := DedupWindowUs(qs.rec.Options)
	if seq, id := t.duplicateOf(ps, it.TransactionId, window); seq != 0 {
		r.Status = command.PushItemResult_DUPLICATE
		r.Offset, r.MessageId = seq, id
		return r
	}
	if why := full(qs); checkSize && why != "" {
		r.Status = command.PushItemResult_FAILED
		r.Error = why
		return r
	}
	seq := ps.rec.NextSeq
	m := &msgstore.Message{ID: it.MessageId, TxnID: it.TransactionId, TraceID: it.TraceId,
		ProducerSub: it.ProducerSub, CreatedUs: t.now, Payload: it.Payload}
	if err := t.batch.AppendRolling(ps.rec.Id, ps.rec.FirstSeq, seq, m, segmentSpanUs(qs.rec.Options)); err != nil {
		panic("queue: append: " + err.Error()) // the files cannot take it: stop this replica
	}
	if window > 0 { // duplicateOf built the partition's index
		t.dedup = append(t.dedup, t.d.dedup.insert(ps.rec.Id, msgstore.TxnHash(it.TransactionId), seq))
	}
	qs.rec.Pending++
	qs.dirty = true
	ps.rec.NextSeq++
	ps.rec.Count++
	ps.rec.LastCreatedUs = t.now
	ps.dirty = true
	r.Status = command.PushItemResult_QUEUED
	r.MessageId = it.MessageId
	r.Offset = seq
	t.touch(it.Queue)
	t.flow(it.Queue).Pushed++
	return r
}
