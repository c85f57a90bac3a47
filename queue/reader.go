package queue

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
)

// Reader answers questions about the queue state from one committed view
// of the state file (and the message files, which hold at least what that
// view committed). Records it returns are copies the caller may keep.
type Reader struct {
	r    store.Reader
	msgs *msgstore.Store
}

// Reader reads through r, a read transaction of the state file.
func (d *Domain) Reader(r store.Reader) *Reader { return &Reader{r: r, msgs: d.msgs} }

// Queue returns a queue, or nil.
func (rd *Reader) Queue(name string) *command.QueueRecord {
	if v := rd.r.Get(bQueues, prefix(name)); v != nil {
		rec := &command.QueueRecord{}
		command.MustDecodeRecord(v, rec)
		return rec
	}
	return nil
}

// Queues lists every queue in name order.
func (rd *Reader) Queues() []*command.QueueRecord {
	var out []*command.QueueRecord
	c := rd.r.Cursor(bQueues)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec := &command.QueueRecord{}
		command.MustDecodeRecord(v, rec)
		out = append(out, rec)
	}
	return out
}

// QueueNames lists every queue name, sorted.
func (rd *Reader) QueueNames() []string { return queueNames(rd.r) }

// Partitions lists a queue's partitions in name order.
func (rd *Reader) Partitions(queue string) []*command.PartitionRecord {
	var out []*command.PartitionRecord
	pfx := prefix(queue)
	c := rd.r.Cursor(bPartitions)
	for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
		rec := &command.PartitionRecord{}
		command.MustDecodeRecord(v, rec)
		out = append(out, rec)
	}
	return out
}

// HasPartition reports whether the queue has the named partition.
func (rd *Reader) HasPartition(queue, name string) bool {
	return rd.r.Get(bPartitions, join(queue, name)) != nil
}

// PartitionByID returns a partition, or nil.
func (rd *Reader) PartitionByID(pid []byte) *command.PartitionRecord {
	v := rd.r.Get(bPartitionIDs, pid)
	if v == nil {
		return nil
	}
	if pv := rd.r.Get(bPartitions, v); pv != nil {
		rec := &command.PartitionRecord{}
		command.MustDecodeRecord(pv, rec)
		return rec
	}
	return nil
}

// Message returns a stored message, or nil.
func (rd *Reader) Message(pid []byte, seq uint64) *command.MessageRecord {
	m, err := rd.msgs.Message(pid, seq)
	if err != nil {
		return nil
	}
	return messageRecord(m)
}

// Messages returns the stored messages from..to (inclusive) of a partition,
// in order; it stops at the first it cannot find. A damaged one is an
// error (msgstore.ErrCorrupt), never its bytes.
func (rd *Reader) Messages(pid []byte, from, to uint64) ([]*command.MessageRecord, error) {
	ms, err := rd.msgs.Messages(pid, from, to)
	if err != nil && !errors.Is(err, msgstore.ErrNotFound) {
		return nil, err
	}
	out := make([]*command.MessageRecord, len(ms))
	for i, m := range ms {
		out[i] = messageRecord(m)
	}
	return out, nil
}

func messageRecord(m *msgstore.Message) *command.MessageRecord {
	return &command.MessageRecord{Id: m.ID, TransactionId: m.TxnID, TraceId: m.TraceID, CreatedUs: m.CreatedUs,
		ProducerSub: m.ProducerSub, Payload: m.Payload}
}

// Cursor returns a group's cursor in a partition, or nil.
func (rd *Reader) Cursor(pid []byte, group string) *command.CursorRecord {
	if v := rd.r.Get(bCursors, pidKey(pid, group)); v != nil {
		rec := &command.CursorRecord{}
		command.MustDecodeRecord(v, rec)
		return rec
	}
	return nil
}

// PopReadiness is what a pop would find now, without taking anything.
type PopReadiness struct {
	// Ready: a pop entry may return messages (or must record a first
	// subscription); propose it.
	Ready bool
	// Partitions is how many partitions have something deliverable, counted
	// up to the limit the caller asked for (at least 1 when Ready).
	Partitions int
	// NextUs: when something becomes deliverable by time alone (a lease
	// expiry, a retry delay, a window or a delay ending); 0 = only a new
	// entry can change the answer.
	NextUs int64
}

// PopReadiness judges a pop at time now with the same rules apply uses,
// counting deliverable partitions up to limit (a parked pop wakes that
// many others). It reads only the queue, partition, group, namespace and
// task of the request.
func (rd *Reader) PopReadiness(in *command.Pop, now int64, limit int) PopReadiness {
	var out PopReadiness
	limit = max(limit, 1)
	group := in.ConsumerGroup
	if group == "" {
		group = command.QueueModeGroup
	}
	for _, qname := range popQueues(rd.r, in) {
		q := rd.Queue(qname)
		if q == nil {
			continue
		}
		g := rd.Group(qname, group)
		if g == nil {
			return PopReadiness{Ready: true, Partitions: 1} // first contact is recorded by an entry
		}
		if g.Kafka {
			continue // a Kafka group's: a Queen pop takes nothing of it
		}
		check := func(p *command.PartitionRecord) bool {
			cur := rd.Cursor(p.Id, group)
			if cur == nil {
				cur = &command.CursorRecord{Consumed: startConsumed(rd.msgs, p, group, g)}
			}
			e := evaluate(rd.msgs, q, p, cur, now)
			out.NextUs = earliest(out.NextUs, e.nextUs)
			if e.ok {
				out.Ready = true
				out.Partitions++
			}
			return out.Partitions >= limit
		}
		if in.HasPartition {
			if v := rd.r.Get(bPartitions, join(qname, in.Partition)); v != nil {
				p := &command.PartitionRecord{}
				command.MustDecodeRecord(v, p)
				if check(p) {
					return out
				}
			}
			continue
		}
		pfx := prefix(qname)
		c := rd.r.Cursor(bPartitions)
		for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
			p := &command.PartitionRecord{}
			command.MustDecodeRecord(v, p)
			if check(p) {
				return out
			}
		}
	}
	return out
}

// Group is a group's record in a queue (where it started, its conflation
// policy), or nil when the group never popped it.
func (rd *Reader) Group(queue, group string) *command.GroupRecord {
	v := rd.r.Get(bGroups, join(queue, group))
	if v == nil {
		return nil
	}
	g := &command.GroupRecord{}
	command.MustDecodeRecord(v, g)
	return g
}

// DLQFilter selects dead letters (spec §4.10).
type DLQFilter struct {
	Queue, ConsumerGroup, Partition string
	FromUs, ToUs                    int64 // 0 = open
	Limit, Offset                   int
}

// DeadLetters lists dead letters newest first, and how many match in all.
func (rd *Reader) DeadLetters(f DLQFilter) ([]*command.DLQRecord, int) {
	match := func(d *command.DLQRecord) bool {
		return (f.ConsumerGroup == "" || d.ConsumerGroup == f.ConsumerGroup) &&
			(f.Partition == "" || d.Partition == f.Partition) &&
			(f.FromUs == 0 || d.FailedUs >= f.FromUs) &&
			(f.ToUs == 0 || d.FailedUs <= f.ToUs)
	}
	var out []*command.DLQRecord
	total := 0
	take := func(tk, v []byte) {
		d := &command.DLQRecord{}
		command.MustDecodeRecord(v, d)
		if !match(d) {
			return
		}
		d.RecordId = append([]byte(nil), tk...)
		if total >= f.Offset && len(out) < f.Limit {
			out = append(out, d)
		}
		total++
	}
	if f.Queue != "" {
		q := rd.Queue(f.Queue)
		if q == nil {
			return nil, 0
		}
		c := rd.r.Cursor(bDLQ)
		pfx := q.Id
		// Newest first: walk the queue's keys backwards.
		end := append(append([]byte(nil), pfx...), bytes.Repeat([]byte{0xff}, 21)...)
		k, v := c.Seek(end)
		if k == nil {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			if !bytes.HasPrefix(k, pfx) {
				if bytes.Compare(k, pfx) < 0 {
					break
				}
				continue
			}
			take(k[len(pfx):], v)
		}
		return out, total
	}
	live := map[string]bool{}
	c := rd.r.Cursor(bDLQTime)
	for k, qid := c.Last(); k != nil; k, qid = c.Prev() {
		alive, seen := live[string(qid)]
		if !seen {
			alive = rd.r.Get(bGraveyard, graveKey(graveQueue, qid)) == nil
			live[string(qid)] = alive
		}
		if !alive {
			continue
		}
		if v := rd.r.Get(bDLQ, append(append([]byte(nil), qid...), k...)); v != nil {
			take(k, v)
		}
	}
	return out, total
}

// Committed lists what the state file committed of every partition, for a
// snapshot of the message files and for trimming them after a crash.
func (rd *Reader) Committed() []msgstore.PartitionState {
	var out []msgstore.PartitionState
	c := rd.r.Cursor(bPartitions)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		p := &command.PartitionRecord{}
		command.MustDecodeRecord(v, p)
		out = append(out, msgstore.PartitionState{PID: p.Id, FirstSeq: p.FirstSeq, NextSeq: p.NextSeq})
	}
	return out
}

// Live reports whether a partition id is in the state.
func (rd *Reader) Live(pid []byte) bool { return rd.r.Get(bPartitionIDs, pid) != nil }

// DigestMessages writes every committed message, its index entry and its
// record, to w (the state hash's part that lives in the message files).
func (rd *Reader) DigestMessages(w io.Writer) error {
	for _, p := range rd.Committed() {
		var merr error
		err := rd.msgs.EachEntry(p.PID, p.FirstSeq, p.NextSeq, func(seq uint64, e msgstore.Entry) bool {
			m, err := rd.msgs.Message(p.PID, seq)
			if err != nil {
				merr = fmt.Errorf("message %x/%d: %w", p.PID, seq, err)
				return false
			}
			fmt.Fprintf(w, "m|%x|%d|%+v|%x|%s|%s|%s|%s\n", p.PID, seq, e, m.ID, m.TxnID, m.TraceID, m.ProducerSub, m.Payload)
			return true
		})
		if err == nil {
			err = merr
		}
		if err != nil {
			return fmt.Errorf("entries of %x: %w", p.PID, err)
		}
	}
	return nil
}
