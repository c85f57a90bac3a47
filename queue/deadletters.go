package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
)

// Dead letters by id and by message, replay and purge.
//
// A dead letter's id is its key in the DLQ time index (failedUs, entry
// index, ordinal: 20 bytes, unique in the log and never reused), written
// as 40 hex digits. The time index maps it to its queue, so a record is
// found by id in two reads, and records stored before ids were shown have
// one too. The dlq_msg index finds a message's dead letters by (partition,
// transactionId hash) for the message views and the retry route.

// DeadLetterID is a dead letter's id as the API shows it.
func DeadLetterID(key []byte) string { return hex.EncodeToString(key) }

// ParseDeadLetterID reads an id DeadLetterID wrote.
func ParseDeadLetterID(s string) ([]byte, bool) {
	b, err := hex.DecodeString(s)
	return b, err == nil && len(b) == 20
}

// ReplayTxnPrefix starts the transactionId of every replayed message:
// dlq:<record id>, so that a replay retried within the dedup window of the
// destination is a duplicate, never a second copy.
const ReplayTxnPrefix = "dlq:"

func dlqMsgKey(pid []byte, txn string, tk []byte) []byte {
	k := make([]byte, 0, len(pid)+8+len(tk))
	k = append(k, pid...)
	k = binary.BigEndian.AppendUint64(k, msgstore.TxnHash(txn))
	return append(k, tk...)
}

// dlqRecord reads the dead letter with time key tk: its queue id and
// record, or nil when there is none or its queue was deleted.
func dlqRecord(r store.Reader, tk []byte) ([]byte, *command.DLQRecord) {
	qid := r.Get(bDLQTime, tk)
	if qid == nil || r.Get(bGraveyard, graveKey(graveQueue, qid)) != nil {
		return nil, nil
	}
	v := r.Get(bDLQ, append(append([]byte(nil), qid...), tk...))
	if v == nil {
		return nil, nil
	}
	rec := &command.DLQRecord{}
	command.MustDecodeRecord(v, rec)
	rec.RecordId = append([]byte(nil), tk...)
	return append([]byte(nil), qid...), rec
}

// dlqOfMessage lists the dead letters of partition pid whose
// transactionId is txn, oldest failure first, each with its queue id.
func dlqOfMessage(r store.Reader, pid []byte, txn string) []*command.DLQRecord {
	pfx := dlqMsgKey(pid, txn, nil)
	var out []*command.DLQRecord
	c := r.Cursor(bDLQMsg)
	for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
		tk := append([]byte(nil), k[len(pfx):]...)
		if _, rec := dlqRecord(r, tk); rec != nil && rec.TransactionId == txn && bytes.Equal(rec.PartitionId, pid) {
			out = append(out, rec)
		}
	}
	return out
}

// deadLetterOf is the rule naming a dead letter by its message: of the
// partition's dead letters carrying the transactionId, the oldest failure
// under the group ("" = queue mode, as an ack that names no group). A
// replayed record is gone, so a retried call never moves another group's.
func deadLetterOf(r store.Reader, pid []byte, txn, group string) *command.DLQRecord {
	if group == "" {
		group = command.QueueModeGroup
	}
	for _, rec := range dlqOfMessage(r, pid, txn) {
		if rec.ConsumerGroup == group {
			return rec
		}
	}
	return nil
}

// addDeadLetter files rec in the queue's DLQ, the time index and the
// message index.
func (t *Tx) addDeadLetter(qs *queueState, rec *command.DLQRecord) {
	if !t.firstDeadLetter && !HasDeadLetters(t.tx) {
		t.firstDeadLetter = true
	}
	tk := timeKey(t.now, t.index, t.nextOrdinal())
	t.tx.Put(bDLQ, append(append([]byte(nil), qs.rec.Id...), tk...), command.MustEncodeRecord(rec))
	t.tx.Put(bDLQTime, tk, append([]byte(nil), qs.rec.Id...))
	t.tx.Put(bDLQMsg, dlqMsgKey(rec.PartitionId, rec.TransactionId, tk), append([]byte(nil), qs.rec.Id...))
	qs.rec.DlqCount++
	qs.dirty = true
	t.flow(qs.rec.Name).DeadLettered++
}

// FirstDeadLetter reports whether the command filed a dead letter in a
// state that held none: every dead letter then has its message index
// entry, and the FSM records the index complete without a backfill.
func (t *Tx) FirstDeadLetter() bool { return t.firstDeadLetter }

// HasDeadLetters reports whether any dead letter is stored.
func HasDeadLetters(r store.Reader) bool {
	k, _ := r.Cursor(bDLQ).First()
	return k != nil
}

// IndexDeadLetters files up to limit dead letters, from the first key of
// the dlq bucket after after, in the message index (dlq_msg), where one
// stored before that index existed is missing. It returns how many it
// filed, the last key it visited (where the next step resumes) and whether
// records remain.
func (t *Tx) IndexDeadLetters(after []byte, limit int) (indexed int, last []byte, more bool) {
	c := t.tx.Cursor(bDLQ)
	k, v := c.First()
	if len(after) > 0 {
		if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	type row struct{ qid, key []byte }
	var todo []row
	visited := 0
	for ; k != nil; k, v = c.Next() {
		if visited == limit {
			more = true
			break
		}
		visited++
		last = append(last[:0], k...)
		rec := &command.DLQRecord{}
		command.MustDecodeRecord(v, rec)
		qid, tk := k[:len(k)-20], k[len(k)-20:]
		mk := dlqMsgKey(rec.PartitionId, rec.TransactionId, tk)
		if t.tx.Get(bDLQMsg, mk) == nil {
			todo = append(todo, row{append([]byte(nil), qid...), mk})
		}
	}
	for _, r := range todo { // written after the walk: a cursor does not see its own bucket change under it
		t.tx.Put(bDLQMsg, r.key, r.qid)
	}
	return len(todo), last, more
}

// dropDeadLetter removes a stored dead letter from the three places it is
// kept (qs nil: its queue is being purged from the graveyard).
func (t *Tx) dropDeadLetter(qs *queueState, qid, tk []byte, rec *command.DLQRecord) {
	t.tx.Delete(bDLQ, append(append([]byte(nil), qid...), tk...))
	t.tx.Delete(bDLQTime, tk)
	t.tx.Delete(bDLQMsg, dlqMsgKey(rec.PartitionId, rec.TransactionId, tk))
	if qs != nil {
		qs.rec.DlqCount -= min(qs.rec.DlqCount, 1)
		qs.dirty = true
	}
}

// dropDeadLetterKey is dropDeadLetter for a key of the DLQ bucket.
func (t *Tx) dropDeadLetterKey(qs *queueState, key []byte) {
	qid, tk := key[:len(key)-20], key[len(key)-20:]
	rec := &command.DLQRecord{}
	if v := t.tx.Get(bDLQ, key); v != nil {
		command.MustDecodeRecord(v, rec)
	}
	t.dropDeadLetter(qs, qid, tk, rec)
}

// ReplayDeadLetter moves one dead letter back as a new message (see
// command.ReplayDeadLetter). The record is the one named by id, or, by
// message, the oldest failure of (partition, transactionId) under the
// named group (queue mode when none is named). The new message goes to the
// record's own partition unless the command names a destination; like any
// push it is a new message every group of that queue receives, and only
// this record leaves the DLQ (another group's record of the same message
// stays).
func (t *Tx) ReplayDeadLetter(in *command.ReplayDeadLetter) *command.ReplayResult {
	res := &command.ReplayResult{Verdict: command.ReplayResult_GONE}
	var qid []byte
	var rec *command.DLQRecord
	if len(in.RecordId) > 0 {
		qid, rec = dlqRecord(t.tx, in.RecordId)
	} else if rec = deadLetterOf(t.tx, in.PartitionId, in.TransactionId, in.ConsumerGroup); rec != nil {
		qid = append([]byte(nil), t.tx.Get(bDLQTime, rec.RecordId)...)
	}
	if rec == nil || rec.Queue != in.SourceQueue {
		return res // the front end read another state: answered as gone, nothing written
	}
	res.RecordId, res.ConsumerGroup = rec.RecordId, rec.ConsumerGroup
	queue, partition := rec.Queue, rec.Partition
	if in.Queue != "" {
		queue, partition = in.Queue, in.Partition
		if partition == "" {
			partition = DefaultPartition
		}
	}
	it := &command.PushItem{Queue: queue, Partition: partition, TransactionId: ReplayTxnPrefix + DeadLetterID(rec.RecordId),
		TraceId: rec.TraceId, Payload: rec.Payload, MessageId: in.MessageId, ProducerSub: rec.ProducerSub}
	pr := t.push(it, true)
	res.Queue, res.Partition, res.PartitionId = queue, partition, pr.PartitionId
	res.TransactionId, res.MessageId, res.Offset = it.TransactionId, pr.MessageId, pr.Offset
	switch pr.Status {
	case command.PushItemResult_DUPLICATE:
		res.Verdict = command.ReplayResult_DUPLICATE
		return res
	case command.PushItemResult_FAILED:
		res.Verdict, res.Error = command.ReplayResult_FULL, pr.Error
		return res
	}
	t.dropDeadLetter(t.queue(rec.Queue), qid, rec.RecordId, rec)
	res.Verdict = command.ReplayResult_MOVED
	return res
}

// PurgeDeadLetters removes up to in.Limit of a queue's dead letters
// (one group's when named), oldest first.
func (t *Tx) PurgeDeadLetters(in *command.PurgeDeadLetters) *command.PurgeResult {
	res := &command.PurgeResult{}
	qs := t.queue(in.Queue)
	if qs == nil {
		return res
	}
	limit := int(in.Limit)
	if limit <= 0 {
		limit = 10000
	}
	var keys [][]byte
	c := t.tx.Cursor(bDLQ)
	for k, v := c.Seek(qs.rec.Id); k != nil && hasPrefix(k, qs.rec.Id); k, v = c.Next() {
		if in.ConsumerGroup != "" {
			rec := &command.DLQRecord{}
			command.MustDecodeRecord(v, rec)
			if rec.ConsumerGroup != in.ConsumerGroup {
				continue
			}
		}
		if len(keys) == limit {
			res.More = true
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		t.dropDeadLetterKey(qs, k)
	}
	res.Purged = uint64(len(keys))
	return res
}
