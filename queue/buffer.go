package queue

import (
	"encoding/binary"

	"github.com/queen-node/queen-node/command"
)

// The push buffer of push maintenance (spec §4.14): while it is on, pushes
// are held here in arrival order, invisible to pops; once it is off they
// are appended, oldest first, in bounded drain steps. It is replicated
// state like the rest, so a leader change or a kill -9 while buffering
// loses or repeats nothing.

func bufferKey(index uint64, n uint32) []byte {
	k := make([]byte, 0, 12)
	k = binary.BigEndian.AppendUint64(k, index)
	return binary.BigEndian.AppendUint32(k, n)
}

// Buffer holds a push item; it answers "buffered", with the ids a queued
// push would carry except its offset, which it gets when it is appended.
// A queue at maxSize refuses it now, as Push would: what the buffer takes
// is appended whatever the queue holds by then.
func (t *Tx) Buffer(it *command.PushItem) *command.PushItemResult {
	if qs := t.queue(it.Queue); qs != nil {
		if why := full(qs); why != "" {
			return &command.PushItemResult{Status: command.PushItemResult_FAILED, Error: why,
				TransactionId: it.TransactionId, Queue: it.Queue, TraceId: it.TraceId}
		}
	}
	rec := &command.BufferedPush{Item: it, ReceivedUs: t.now}
	t.tx.Put(bPushBuffer, bufferKey(t.index, t.nextOrdinal()), command.MustEncodeRecord(rec))
	return &command.PushItemResult{Status: command.PushItemResult_BUFFERED, MessageId: it.MessageId,
		TransactionId: it.TransactionId, Queue: it.Queue, TraceId: it.TraceId}
}

// Buffered reports whether pushes wait in the buffer (of the command's
// tenant: each tenant's pushes keep their own order).
func (t *Tx) Buffered() bool { k, _ := t.tx.Cursor(bPushBuffer).First(); return k != nil }

// Buffered reports whether pushes wait in the buffer.
func (rd *Reader) Buffered() bool { k, _ := rd.r.Cursor(bPushBuffer).First(); return k != nil }

// Drain appends up to limit buffered pushes, oldest first, as pushes of
// this entry (the dedup window applies; maxSize was checked when the
// buffer took them). It returns how many it took from the buffer.
func (t *Tx) Drain(limit int) int {
	var keys [][]byte
	var items []*command.PushItem
	c := t.tx.Cursor(bPushBuffer)
	for k, v := c.First(); k != nil && len(keys) < limit; k, v = c.Next() {
		rec := &command.BufferedPush{}
		command.MustDecodeRecord(v, rec)
		keys = append(keys, append([]byte(nil), k...))
		items = append(items, rec.Item)
	}
	for i, k := range keys {
		t.tx.Delete(bPushBuffer, k)
		t.push(items[i], false)
	}
	return len(keys)
}
