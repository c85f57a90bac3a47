package queue

import (
	"bytes"
	"encoding/binary"
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/traces"
)

// Deleting one message (spec §4.9) from an append-only partition: the
// message files are never rewritten. A deleted message gets a tombstone in
// the state file (bDeleted, pid seq); the partition record counts the
// tombstones it holds (Deleted), so a partition without any pays nothing.
// Pops skip tombstoned messages: a group whose next message is deleted
// moves past it (counted as consumed, like an ack), and a deleted message
// inside a delivered run is left out of the delivery and pre-acked in the
// lease, so the run completes when the rest is acked. A message already
// delivered when it is deleted can still be acked. The dedup window no
// longer counts a deleted message (a push of its transactionId is a new
// message). Retention removes tombstones with the prefix they are in, and
// the graveyard with a deleted queue's partitions. See queue/DESIGN.md.

func tombKey(pid []byte, seq uint64) []byte {
	k := make([]byte, 0, len(pid)+8)
	k = append(k, pid...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// liveAfter counts p's messages after seq that are not deleted, and names
// the first of them (0: none): what a group whose cursor sits on seq has
// still to consume.
func liveAfter(r store.Reader, p *command.PartitionRecord, seq uint64) (n, first uint64) {
	last := p.NextSeq - 1
	if seq >= last {
		return 0, 0
	}
	n, first = last-seq, seq+1
	if p.Deleted == 0 {
		return n, first
	}
	c := r.Cursor(bDeleted)
	for k, _ := c.Seek(tombKey(p.Id, seq+1)); k != nil && len(k) == len(p.Id)+8 && bytes.HasPrefix(k, p.Id); k, _ = c.Next() {
		s := binary.BigEndian.Uint64(k[len(p.Id):])
		if s > last {
			break
		}
		n--
		if s == first {
			first++
		}
	}
	if n == 0 {
		first = 0
	}
	return n, first
}

func isDeleted(r store.Reader, p *command.PartitionRecord, seq uint64) bool {
	return p.Deleted > 0 && r.Get(bDeleted, tombKey(p.Id, seq)) != nil
}

// stored reports whether seq of ps is stored, not deleted, and carries txn.
func (t *Tx) stored(ps *partState, seq uint64, txn string) bool {
	if seq < ps.rec.FirstSeq || seq >= ps.rec.NextSeq || isDeleted(t.tx, ps.rec, seq) {
		return false
	}
	got, err := t.batch.Txn(ps.rec.Id, seq)
	return err == nil && got == txn
}

// DeleteMessage tombstones one message and removes its traces (see
// command.DeleteMessage).
func (t *Tx) DeleteMessage(in *command.DeleteMessage) *command.DeleteMessageResult {
	ps := t.partitionByID(in.PartitionId)
	if ps == nil {
		return &command.DeleteMessageResult{}
	}
	res := &command.DeleteMessageResult{Queue: ps.rec.Queue}
	if !t.stored(ps, in.Seq, in.TransactionId) {
		return res
	}
	t.tx.Put(bDeleted, tombKey(ps.rec.Id, in.Seq), binary.BigEndian.AppendUint64(nil, uint64(t.now)))
	ps.rec.Deleted++
	ps.dirty = true
	traces.RemoveMessage(t.tx, ps.rec.Id, in.Seq)
	t.touch(ps.rec.Queue)
	res.Deleted = true
	return res
}

// RecordTrace stores a trace event of a stored message (see
// command.RecordTrace).
func (t *Tx) RecordTrace(in *command.RecordTrace) *command.TraceResult {
	ps := t.partitionByID(in.PartitionId)
	if ps == nil || !t.stored(ps, in.Seq, in.TransactionId) {
		return &command.TraceResult{}
	}
	rec := &command.TraceRecord{Id: in.TraceId, PartitionId: ps.rec.Id, Seq: in.Seq, TransactionId: in.TransactionId,
		ConsumerGroup: in.ConsumerGroup, TraceNames: in.TraceNames, EventType: in.EventType, Data: in.Data,
		CreatedUs: t.now, WorkerId: in.WorkerId, Queue: ps.rec.Queue, Partition: ps.rec.Name}
	traces.Add(t.tx, rec, t.index, t.nextOrdinal())
	return &command.TraceResult{Found: true, TraceId: in.TraceId, Queue: ps.rec.Queue}
}

// skipDeleted moves a group with no live lease past the deleted messages
// at the head of ps: they count as consumed.
func (t *Tx) skipDeleted(qs *queueState, ps *partState, cs *cursorState, group string) {
	before := max(cs.rec.Consumed, ps.rec.FirstSeq-1)
	at := before
	c := t.tx.Cursor(bDeleted)
	for k, _ := c.Seek(tombKey(ps.rec.Id, at+1)); k != nil && bytes.Equal(k, tombKey(ps.rec.Id, at+1)) && at+1 < ps.rec.NextSeq; k, _ = c.Next() {
		at++
	}
	if at == before {
		return
	}
	t.consumed(qs, group, before, at)
	cs.rec.Consumed, cs.rec.RetryCount, cs.rec.RetryVisibleUs = at, 0, 0
	cs.dirty = true
}

// tombstones walks a partition's tombstones upwards, for a pop.
type tombstones struct {
	c    store.Cursor
	pid  []byte
	next uint64
	ok   bool
}

// tombstonesFrom is nil when ps holds none.
func (t *Tx) tombstonesFrom(ps *partState, seq uint64) *tombstones {
	if ps.rec.Deleted == 0 {
		return nil
	}
	ts := &tombstones{c: t.tx.Cursor(bDeleted), pid: ps.rec.Id}
	ts.load(ts.c.Seek(tombKey(ps.rec.Id, seq)))
	return ts
}

func (ts *tombstones) load(k, _ []byte) {
	ts.ok = k != nil && len(k) == len(ts.pid)+8 && bytes.HasPrefix(k, ts.pid)
	if ts.ok {
		ts.next = binary.BigEndian.Uint64(k[len(ts.pid):])
	}
}

// has reports whether seq is deleted; calls ask in increasing seq order.
func (ts *tombstones) has(seq uint64) bool {
	if ts == nil {
		return false
	}
	for ts.ok && ts.next < seq {
		ts.load(ts.c.Next())
	}
	return ts.ok && ts.next == seq
}

// removeTombstonesBelow drops the tombstones of seqs below first (retention
// removed those messages).
func (t *Tx) removeTombstonesBelow(ps *partState, first uint64) {
	if ps.rec.Deleted == 0 {
		return
	}
	var keys [][]byte
	end := tombKey(ps.rec.Id, first)
	c := t.tx.Cursor(bDeleted)
	for k, _ := c.Seek(ps.rec.Id); k != nil && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		t.tx.Delete(bDeleted, k)
	}
	ps.rec.Deleted -= min(ps.rec.Deleted, uint64(len(keys)))
	ps.dirty = true
}

// findMessage is the rule that names a message by (partition,
// transactionId), once for every route that does (the message views,
// DELETE, traces): the newest stored message of the partition that carries
// the transactionId and is not deleted. Within the dedup window there is
// at most one; after it the same id may name two messages (README, "What
// names a message after the window"), and the newest is the one a producer
// pushed last. It reads the index backwards, up to maxFindScan entries.
func findMessage(es entries, r store.Reader, msgs *msgstore.Store, p *command.PartitionRecord, txn string) uint64 {
	if p.NextSeq <= p.FirstSeq {
		return 0
	}
	want := msgstore.TxnHash(txn)
	scanned := uint64(0)
	for hi := p.NextSeq - 1; hi >= p.FirstSeq && scanned < maxFindScan; {
		lo := p.FirstSeq
		if hi-p.FirstSeq >= 4096 {
			lo = hi - 4095
		}
		var hits []uint64
		es.EachEntry(p.Id, lo, hi+1, func(seq uint64, e msgstore.Entry) bool {
			if e.TxnHash == want {
				hits = append(hits, seq)
			}
			return true
		})
		for i := len(hits) - 1; i >= 0; i-- {
			s := hits[i]
			if got, err := msgs.TxnAt(p.Id, s); err == nil && got == txn && !isDeleted(r, p, s) {
				return s
			}
		}
		scanned += hi - lo + 1
		if lo == p.FirstSeq {
			break
		}
		hi = lo - 1
	}
	return 0
}

// maxFindScan bounds the index entries findMessage reads (24 MB of index).
const maxFindScan = 1 << 20

// --- Reads -----------------------------------------------------------------

// FindMessage finds the message (pid, txn) names (see findMessage): its
// partition and seq, or nil and 0.
func (rd *Reader) FindMessage(pid []byte, txn string) (*command.PartitionRecord, uint64) {
	p := rd.PartitionByID(pid)
	if p == nil {
		return nil, 0
	}
	if seq := findMessage(rd.msgs, rd.r, rd.msgs, p, txn); seq != 0 {
		return p, seq
	}
	return p, 0
}

// Deleted reports whether seq of p is deleted.
func (rd *Reader) Deleted(p *command.PartitionRecord, seq uint64) bool {
	return isDeleted(rd.r, p, seq)
}

// DeadLetterByID returns the dead letter with the id, or nil.
func (rd *Reader) DeadLetterByID(id []byte) *command.DLQRecord {
	_, rec := dlqRecord(rd.r, id)
	return rec
}

// DeadLetterOf returns the dead letter a retry of (pid, txn) under group
// names (see deadLetterOf), or nil.
func (rd *Reader) DeadLetterOf(pid []byte, txn, group string) *command.DLQRecord {
	return deadLetterOf(rd.r, pid, txn, group)
}

// DeadLettersOf lists the dead letters of partition pid whose
// transactionId is txn, oldest failure first.
func (rd *Reader) DeadLettersOf(pid []byte, txn string) []*command.DLQRecord {
	return dlqOfMessage(rd.r, pid, txn)
}

// deadLettersOfSeq lists the dead letters of one stored message.
func (rd *Reader) deadLettersOfSeq(pid []byte, hash, seq uint64) []*command.DLQRecord {
	pfx := binary.BigEndian.AppendUint64(append([]byte(nil), pid...), hash)
	var out []*command.DLQRecord
	c := rd.r.Cursor(bDLQMsg)
	for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
		if _, rec := dlqRecord(rd.r, append([]byte(nil), k[len(pfx):]...)); rec != nil && rec.Seq == seq && bytes.Equal(rec.PartitionId, pid) {
			out = append(out, rec)
		}
	}
	return out
}

// Traces lists the traces of one message, oldest first.
func (rd *Reader) Traces(pid []byte, seq uint64) []*command.TraceRecord {
	return traces.OfMessage(rd.r, pid, seq)
}

// TracesByName lists the traces named name, newest first, of live
// partitions in queues visible accepts (nil = all).
func (rd *Reader) TracesByName(name string, visible func(queue string) bool, offset, limit int) ([]*command.TraceRecord, int) {
	live := map[string]bool{}
	return traces.ByName(rd.r, name, func(t *command.TraceRecord) bool {
		ok, seen := live[string(t.PartitionId)]
		if !seen {
			ok = rd.Live(t.PartitionId)
			live[string(t.PartitionId)] = ok
		}
		return ok && (visible == nil || visible(t.Queue))
	}, offset, limit)
}

// TraceNames lists every trace name with its counts, over live partitions
// of queues visible accepts (nil = all).
func (rd *Reader) TraceNames(visible func(queue string) bool) []traces.Name {
	live := map[string]bool{}
	return traces.Names(rd.r, func(pid []byte) bool {
		ok, seen := live[string(pid)]
		if !seen {
			p := rd.PartitionByID(pid)
			ok = p != nil && (visible == nil || visible(p.Queue))
			live[string(pid)] = ok
		}
		return ok
	})
}

// Message statuses of the inspection views (spec §4.9).
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	StatusDeadLetter = "dead_letter"
)

// GroupAt is where one group's cursor stands against one message.
type GroupAt struct {
	Name           string
	Consumed       bool
	LeaseExpiresUs int64 // the group's live lease on the partition; 0 = none
}

// partView is what the status of a partition's messages depends on: its
// cursors, by group name.
type partView struct {
	p      *command.PartitionRecord
	groups []string
	curs   []*command.CursorRecord
	qm     *command.CursorRecord
	bus    int
}

func (rd *Reader) partView(p *command.PartitionRecord) *partView {
	pv := &partView{p: p}
	c := rd.r.Cursor(bCursors)
	for k, v := c.Seek(p.Id); k != nil && hasPrefix(k, p.Id); k, v = c.Next() {
		cur := &command.CursorRecord{}
		command.MustDecodeRecord(v, cur)
		g := string(k[len(p.Id):])
		pv.groups, pv.curs = append(pv.groups, g), append(pv.curs, cur)
		if g == command.QueueModeGroup {
			pv.qm = cur
		} else {
			pv.bus++
		}
	}
	return pv
}

func consumedBy(cur *command.CursorRecord, p *command.PartitionRecord, seq uint64) bool {
	return max(cur.Consumed, p.FirstSeq-1) >= seq
}

func leasedBy(cur *command.CursorRecord, seq uint64, now int64) bool {
	return leases.Live(cur.Lease, now) && leases.Covers(cur.Lease, seq)
}

// MessageState is a message's status in the views: status is the queue-mode
// status when the partition has a queue-mode cursor (or no cursor at all),
// else the bus status (completed once every group consumed it, processing
// while a group's lease covers it); dead_letter wins over both.
type MessageState struct {
	Status, QueueStatus     string
	ConsumedBy, TotalGroups int
	LeaseExpiresUs          int64 // queue mode's live lease over the message
	Groups                  []GroupAt
	DeadLetters             []*command.DLQRecord
}

func (pv *partView) state(seq uint64, dlq []*command.DLQRecord, now int64) MessageState {
	st := MessageState{TotalGroups: pv.bus, DeadLetters: dlq}
	busLeased := false
	for i, g := range pv.groups {
		cur := pv.curs[i]
		at := GroupAt{Name: g, Consumed: consumedBy(cur, pv.p, seq)}
		if leases.Live(cur.Lease, now) {
			at.LeaseExpiresUs = cur.Lease.ExpiresUs
		}
		st.Groups = append(st.Groups, at)
		if g != command.QueueModeGroup {
			if at.Consumed {
				st.ConsumedBy++
			}
			busLeased = busLeased || leasedBy(cur, seq, now)
		}
	}
	switch {
	case len(dlq) > 0:
		st.QueueStatus = StatusDeadLetter
	case pv.qm != nil && consumedBy(pv.qm, pv.p, seq):
		st.QueueStatus = StatusCompleted
	case pv.qm != nil && leasedBy(pv.qm, seq, now):
		st.QueueStatus = StatusProcessing
		st.LeaseExpiresUs = pv.qm.Lease.ExpiresUs
	default:
		st.QueueStatus = StatusPending
	}
	st.Status = st.QueueStatus
	if st.Status != StatusDeadLetter && pv.qm == nil && pv.bus > 0 {
		switch {
		case st.ConsumedBy == pv.bus:
			st.Status = StatusCompleted
		case busLeased:
			st.Status = StatusProcessing
		default:
			st.Status = StatusPending
		}
	}
	return st
}

// MessageFilter selects messages for GET /api/v1/messages.
type MessageFilter struct {
	Queue, Partition, Namespace, Task, Status string
	FromUs, ToUs                              int64 // inclusive; 0 = open
	Limit, Offset                             int
	Visible                                   func(queue string) bool // nil = every queue
}

// MessageRow is one message of the list.
type MessageRow struct {
	Queue     *command.QueueRecord
	Partition *command.PartitionRecord
	Seq       uint64
	Message   *command.MessageRecord // payload included (sealed as stored)
	MessageState
}

// MessagesMode says how the listed partitions are consumed.
type MessagesMode struct {
	HasQueueMode bool
	BusGroups    int
}

// Type is the mode's name in the API (spec §4.9): queue, bus, hybrid or
// none.
func (m MessagesMode) Type() string {
	switch {
	case m.HasQueueMode && m.BusGroups > 0:
		return "hybrid"
	case m.HasQueueMode:
		return "queue"
	case m.BusGroups > 0:
		return "bus"
	}
	return "none"
}

// maxListScan bounds the index entries one list reads per partition.
const maxListScan = 100_000

// ListMessages lists stored, not deleted messages newest first (by
// createdAt, then queue, partition and seq), after the filter, with the
// mode of the partitions that hold messages in the time range.
func (rd *Reader) ListMessages(f MessageFilter, now int64) ([]MessageRow, MessagesMode) {
	type cand struct {
		q    *command.QueueRecord
		pv   *partView
		seq  uint64
		us   int64
		st   MessageState
		rank int
	}
	var cands []cand
	var mode MessagesMode
	busNames := map[string]bool{}
	need := f.Offset + f.Limit
	var queues []*command.QueueRecord
	if f.Queue != "" {
		if q := rd.Queue(f.Queue); q != nil {
			queues = append(queues, q)
		}
	} else {
		queues = rd.Queues()
	}
	rank := 0
	for _, q := range queues {
		if (f.Namespace != "" && q.Namespace != f.Namespace) || (f.Task != "" && q.Task != f.Task) ||
			(f.Visible != nil && !f.Visible(q.Name)) {
			continue
		}
		for _, p := range rd.Partitions(q.Name) {
			if (f.Partition != "" && p.Name != f.Partition) || p.NextSeq <= p.FirstSeq {
				continue
			}
			hi := p.NextSeq - 1
			if f.ToUs != 0 {
				hi = lastCreatedAtOrBefore(rd.msgs, p, f.ToUs)
			}
			lo := p.FirstSeq
			if f.FromUs != 0 {
				lo = firstCreatedAtOrAfter(rd.msgs, p, f.FromUs)
			}
			if hi < lo || hi < p.FirstSeq {
				continue
			}
			pv := rd.partView(p)
			mode.HasQueueMode = mode.HasQueueMode || pv.qm != nil
			for _, g := range pv.groups {
				if g != command.QueueModeGroup {
					busNames[g] = true
				}
			}
			rank++
			kept, scanned := 0, 0
			for top := hi; top >= lo && kept < need && scanned < maxListScan; {
				bottom := lo
				if top-lo >= 1024 {
					bottom = top - 1023
				}
				var ents []msgstore.Entry
				rd.msgs.EachEntry(p.Id, bottom, top+1, func(_ uint64, e msgstore.Entry) bool { ents = append(ents, e); return true })
				for i := len(ents) - 1; i >= 0 && kept < need; i-- {
					seq := bottom + uint64(i)
					scanned++
					if isDeleted(rd.r, p, seq) {
						continue
					}
					st := pv.state(seq, rd.deadLettersOfSeq(p.Id, ents[i].TxnHash, seq), now)
					if f.Status != "" && st.Status != f.Status {
						continue
					}
					cands = append(cands, cand{q: q, pv: pv, seq: seq, us: ents[i].CreatedUs, st: st, rank: rank})
					kept++
				}
				if bottom == lo || len(ents) == 0 {
					break
				}
				top = bottom - 1
			}
		}
	}
	mode.BusGroups = len(busNames)
	sortCands := func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.us != b.us {
			return a.us > b.us
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return a.seq > b.seq
	}
	sort.Slice(cands, sortCands)
	var out []MessageRow
	for i := f.Offset; i < len(cands) && len(out) < f.Limit; i++ {
		c := cands[i]
		m := rd.Message(c.pv.p.Id, c.seq)
		if m == nil {
			continue
		}
		out = append(out, MessageRow{Queue: c.q, Partition: c.pv.p, Seq: c.seq, Message: m, MessageState: c.st})
	}
	return out, mode
}

// firstCreatedAtOrAfter is the first seq of p created at or after us
// (NextSeq when none is).
func firstCreatedAtOrAfter(es entries, p *command.PartitionRecord, us int64) uint64 {
	return lastCreatedAtOrBefore(es, p, us-1) + 1
}

// MessageDetail is one message for GET /api/v1/messages/:p/:t.
type MessageDetail struct {
	MessageRow
	Mode MessagesMode
}

// MessageDetail reads the message (pid, txn) names, or nil.
func (rd *Reader) MessageDetail(pid []byte, txn string, now int64) *MessageDetail {
	p, seq := rd.FindMessage(pid, txn)
	if seq == 0 {
		return nil
	}
	q := rd.Queue(p.Queue)
	m := rd.Message(p.Id, seq)
	if q == nil || m == nil {
		return nil
	}
	pv := rd.partView(p)
	st := pv.state(seq, rd.deadLettersOfSeq(p.Id, msgstore.TxnHash(txn), seq), now)
	return &MessageDetail{
		MessageRow: MessageRow{Queue: q, Partition: p, Seq: seq, Message: m, MessageState: st},
		Mode:       MessagesMode{HasQueueMode: pv.qm != nil, BusGroups: pv.bus},
	}
}
