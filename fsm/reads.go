package fsm

import (
	"bytes"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/store"
)

// Reader answers the front ends' questions from one consistent view of the
// state. Records it returns are copies the caller may keep.
type Reader struct {
	r store.Reader
}

func decode[T proto.Message](v []byte, m T) T {
	mustUnmarshal(v, m)
	return m
}

// Meta returns the FSM's bookkeeping record.
func (rd *Reader) Meta() *command.MetaRecord {
	if v := rd.r.Get(bMeta, metaKey); v != nil {
		return decode(v, &command.MetaRecord{})
	}
	return &command.MetaRecord{}
}

// Queue returns a queue, or nil.
func (rd *Reader) Queue(name string) *command.QueueRecord {
	if v := rd.r.Get(bQueues, prefix(name)); v != nil {
		return decode(v, &command.QueueRecord{})
	}
	return nil
}

// Queues lists every queue in name order.
func (rd *Reader) Queues() []*command.QueueRecord {
	var out []*command.QueueRecord
	c := rd.r.Cursor(bQueues)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		out = append(out, decode(v, &command.QueueRecord{}))
	}
	return out
}

// Partitions lists a queue's partitions in name order.
func (rd *Reader) Partitions(queue string) []*command.PartitionRecord {
	var out []*command.PartitionRecord
	pfx := prefix(queue)
	c := rd.r.Cursor(bPartitions)
	for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
		out = append(out, decode(v, &command.PartitionRecord{}))
	}
	return out
}

// PartitionByID returns a partition, or nil.
func (rd *Reader) PartitionByID(pid []byte) *command.PartitionRecord {
	v := rd.r.Get(bPartitionIDs, pid)
	if v == nil {
		return nil
	}
	if pv := rd.r.Get(bPartitions, v); pv != nil {
		return decode(pv, &command.PartitionRecord{})
	}
	return nil
}

// Message returns a stored message, or nil.
func (rd *Reader) Message(pid []byte, seq uint64) *command.MessageRecord {
	if v := rd.r.Get(bMessages, messageKey(pid, seq)); v != nil {
		return decode(v, &command.MessageRecord{})
	}
	return nil
}

// Cursor returns a group's cursor in a partition, or nil.
func (rd *Reader) Cursor(pid []byte, group string) *command.CursorRecord {
	if v := rd.r.Get(bCursors, pidKey(pid, group)); v != nil {
		return decode(v, &command.CursorRecord{})
	}
	return nil
}

// PopReadiness is what a pop would find now, without taking anything.
type PopReadiness struct {
	// Ready: a pop entry may return messages (or must record a first
	// subscription); propose it.
	Ready bool
	// NextUs: when something becomes deliverable by time alone (a lease
	// expiry, a retry delay, a window or a delay ending); 0 = only a new
	// entry can change the answer.
	NextUs int64
}

// PopReadiness judges a pop at time now with the same rules apply uses.
func (rd *Reader) PopReadiness(in *command.Pop, now int64) PopReadiness {
	var out PopReadiness
	if rd.Meta().PopMaintenance {
		return out
	}
	group := in.ConsumerGroup
	if group == "" {
		group = command.QueueModeGroup
	}
	for _, qname := range rd.popQueues(in) {
		q := rd.Queue(qname)
		if q == nil {
			continue
		}
		var g *command.GroupRecord
		if v := rd.r.Get(bGroups, join(qname, group)); v != nil {
			g = decode(v, &command.GroupRecord{})
		} else {
			return PopReadiness{Ready: true} // first contact is recorded by an entry
		}
		check := func(p *command.PartitionRecord) bool {
			cur := rd.Cursor(p.Id, group)
			if cur == nil {
				cur = &command.CursorRecord{Consumed: startConsumed(rd.r, p, group, g)}
			}
			e := evaluate(rd.r, q, p, cur, now)
			out.NextUs = earliest(out.NextUs, e.nextUs)
			return e.ok
		}
		if in.HasPartition {
			if v := rd.r.Get(bPartitions, join(qname, in.Partition)); v != nil && check(decode(v, &command.PartitionRecord{})) {
				return PopReadiness{Ready: true}
			}
			continue
		}
		pfx := prefix(qname)
		c := rd.r.Cursor(bPartitions)
		for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
			if check(decode(v, &command.PartitionRecord{})) {
				return PopReadiness{Ready: true}
			}
		}
	}
	return out
}

func (rd *Reader) popQueues(in *command.Pop) []string {
	if in.Queue != "" || in.Namespace == "" {
		return []string{in.Queue}
	}
	var out []string
	for _, q := range rd.Queues() {
		if q.Namespace == in.Namespace && (in.Task == "" || q.Task == in.Task) {
			out = append(out, q.Name)
		}
	}
	return out
}

// PartitionStats are a partition's message counts as seen by queue mode.
type PartitionStats struct {
	Total, Pending, Processing, Completed, Failed, DeadLetter uint64
}

// Add sums stats.
func (s *PartitionStats) Add(o PartitionStats) {
	s.Total += o.Total
	s.Pending += o.Pending
	s.Processing += o.Processing
	s.Completed += o.Completed
	s.Failed += o.Failed
	s.DeadLetter += o.DeadLetter
}

// Stats counts a partition's messages against the queue-mode cursor.
func (rd *Reader) Stats(p *command.PartitionRecord, now int64) PartitionStats {
	st := PartitionStats{Total: p.Count}
	last := p.NextSeq - 1
	consumed := p.FirstSeq - 1
	var processing uint64
	if cur := rd.Cursor(p.Id, command.QueueModeGroup); cur != nil {
		consumed = max(consumed, cur.Consumed)
		if leases.Live(cur.Lease, now) && cur.Lease.LastSeq > consumed {
			processing = cur.Lease.LastSeq - consumed - uint64(len(cur.Lease.Acked))
		}
		if cur.RetryCount > 0 {
			st.Failed = 1
		}
	}
	if consumed > last {
		consumed = last
	}
	st.Completed = min(consumed-(p.FirstSeq-1), p.Count)
	st.Processing = processing
	if pending := last - consumed; pending > processing {
		st.Pending = pending - processing
	}
	return st
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
	take := func(v []byte) {
		d := decode(v, &command.DLQRecord{})
		if !match(d) {
			return
		}
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
			take(v)
		}
		return out, total
	}
	live := map[string]bool{}
	c := rd.r.Cursor(bDLQTime)
	for k, qid := c.Last(); k != nil; k, qid = c.Prev() {
		alive, seen := live[string(qid)]
		if !seen {
			alive = rd.queueIDLive(qid)
			live[string(qid)] = alive
		}
		if !alive {
			continue
		}
		if v := rd.r.Get(bDLQ, append(append([]byte(nil), qid...), k...)); v != nil {
			take(v)
		}
	}
	return out, total
}

func (rd *Reader) queueIDLive(id []byte) bool {
	return rd.r.Get(bGraveyard, graveKey(graveQueue, id)) == nil
}

// KV answers a KV read at time now.
func (rd *Reader) KV(op *command.KVOp, now int64) *command.KVResult {
	return kvstore.Read(rd.r, op, now)
}

// KVReads answers a call of read-only KV ops at time now from this one
// view, or refuses it (KV_DISABLED) when the operator's switch is off, as
// apply refuses writes.
func (rd *Reader) KVReads(ops []*command.KVOp, now int64) *command.KVBatchResult {
	if rd.Meta().KvDisabled {
		return &command.KVBatchResult{Reason: command.Reason_KV_DISABLED, FailedIndex: -1}
	}
	res := &command.KVBatchResult{Ok: true, FailedIndex: -1, Results: make([]*command.KVResult, 0, len(ops))}
	for _, op := range ops {
		res.Results = append(res.Results, rd.KV(op, now))
	}
	return res
}

// SweepDue reports whether a sweep entry would collect anything at now.
func (rd *Reader) SweepDue(now int64) bool {
	if k, _ := rd.r.Cursor(bGraveyard).First(); k != nil {
		return true
	}
	if kvstore.HasDue(rd.r, now) {
		return true
	}
	if idempotency.Due(rd.r, now) {
		return true
	}
	c := rd.r.Cursor(bLeaseIndex)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 8 && int64(beUint64(v)) <= now {
			return true
		}
	}
	return false
}

// QueueNames lists every queue name, sorted.
func (rd *Reader) QueueNames() []string {
	var out []string
	c := rd.r.Cursor(bQueues)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		out = append(out, string(k[:len(k)-1]))
	}
	sort.Strings(out)
	return out
}
