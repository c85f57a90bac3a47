package fsm

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

func applyPush(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	items := cmd.GetPush().Items
	res := &command.PushResult{Items: make([]*command.PushItemResult, len(items))}
	for i, it := range items {
		res.Items[i] = c.push(it)
	}
	return res, true
}

// push appends one message to its partition, creating the queue and the
// partition on first use, unless the partition already holds a message with
// the same transactionId: then nothing is written and the result names the
// original message (spec §4.2, §5.8).
func (c *applyCtx) push(it *command.PushItem) *command.PushItemResult {
	r := &command.PushItemResult{TransactionId: it.TransactionId, Queue: it.Queue, TraceId: it.TraceId}
	qs := c.ensureQueue(it.Queue)
	ps := c.ensurePartition(it.Queue, it.Partition)
	r.PartitionId = ps.rec.Id
	dk := pidKey(ps.rec.Id, it.TransactionId)
	if v := c.tx.Get(bDedup, dk); v != nil {
		r.Status = command.PushItemResult_DUPLICATE
		r.Offset = binary.BigEndian.Uint64(v[:8])
		r.MessageId = append([]byte(nil), v[8:]...)
		return r
	}
	if max := qs.rec.Options.GetMaxSize(); max > 0 && qs.rec.Pending >= uint64(max) {
		r.Status = command.PushItemResult_FAILED
		r.Error = fmt.Sprintf("queue %s is at max capacity (%d pending, maxSize %d)", it.Queue, qs.rec.Pending, max)
		return r
	}
	qs.rec.Pending++
	qs.dirty = true
	seq := ps.rec.NextSeq
	ps.rec.NextSeq++
	ps.rec.Count++
	ps.rec.LastCreatedUs = c.now
	ps.dirty = true
	msg := &command.MessageRecord{
		Id: it.MessageId, TransactionId: it.TransactionId, TraceId: it.TraceId,
		CreatedUs: c.now, ProducerSub: it.ProducerSub, Payload: it.Payload,
	}
	c.tx.Put(bMessages, messageKey(ps.rec.Id, seq), mustMarshal(msg))
	dv := make([]byte, 8, 8+len(it.MessageId))
	binary.BigEndian.PutUint64(dv, seq)
	c.tx.Put(bDedup, dk, append(dv, it.MessageId...))
	r.Status = command.PushItemResult_QUEUED
	r.MessageId = it.MessageId
	r.Offset = seq
	c.touch(it.Queue)
	return r
}
