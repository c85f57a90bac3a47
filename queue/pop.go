package queue

import (
	"bytes"
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
)

// entries is where the pop rules read index entries: the message store as
// flushed (a reader's committed view), or the apply batch (its own writes
// included).
type entries interface {
	Entry(pid []byte, seq uint64) (msgstore.Entry, error)
	EachEntry(pid []byte, first, next uint64, fn func(seq uint64, e msgstore.Entry) bool) error
}

// eligibility is what one (partition, group) offers a pop right now.
type eligibility struct {
	ok     bool
	nextUs int64 // when it may become deliverable without a new entry; 0 = not by time alone
}

func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// startConsumed is where a group with no cursor in p starts (spec §5.7):
// queue mode and "all" subscriptions at the beginning, "new" and timestamp
// subscriptions after the last message created at or before the
// subscription time.
func startConsumed(es entries, p *command.PartitionRecord, group string, g *command.GroupRecord) uint64 {
	if group == command.QueueModeGroup || g == nil || g.Mode == command.GroupRecord_ALL {
		return p.FirstSeq - 1
	}
	return lastCreatedAtOrBefore(es, p, g.FromUs)
}

// evaluate decides whether the group can claim p now. cur.Consumed must
// already hold the group's start in p.
func evaluate(es entries, q *command.QueueRecord, p *command.PartitionRecord, cur *command.CursorRecord, now int64) eligibility {
	consumed := max(cur.Consumed, p.FirstSeq-1)
	if consumed >= p.NextSeq-1 {
		return eligibility{} // nothing pending
	}
	if leases.Live(cur.Lease, now) {
		return eligibility{nextUs: cur.Lease.ExpiresUs}
	}
	var next int64
	if cur.RetryVisibleUs > now {
		next = cur.RetryVisibleUs
	}
	if w := q.Options.GetWindowBuffer(); w > 0 {
		if end := p.LastCreatedUs + w*1e6; end > now {
			next = max(next, end)
		}
	}
	if d := q.Options.GetDelayedProcessing(); d > 0 {
		if e, err := es.Entry(p.Id, consumed+1); err == nil {
			if due := e.CreatedUs + d*1e6; due > now {
				next = max(next, due)
			}
		}
	}
	if next != 0 {
		return eligibility{nextUs: next}
	}
	return eligibility{ok: true}
}

// MaxPopBytes bounds the stored size of the messages one pop delivers (at
// least one message always goes), so that batch=10000 over 2 MB payloads
// cannot build a 20 GB answer. It is a constant of the replicated logic:
// every replica must cut the batch at the same message.
const MaxPopBytes = 16 << 20

// deliverable lists up to budget seqs after consumed, in order, stopping at
// the first message still inside delayedProcessing (delay holds the lane)
// and before the byte budget runs out.
//
// Deleted messages (dead) are not delivered: one between two delivered
// messages is returned in gaps, for the lease to count as acked; one after
// the last delivered message is left for the next pop.
func deliverable(es entries, q *command.QueueRecord, p *command.PartitionRecord, consumed uint64, budget uint32, bytesLeft *int, now int64,
	dead *tombstones) (seqs, gaps []uint64) {
	delay := q.Options.GetDelayedProcessing() * 1e6
	end := min(p.NextSeq, consumed+1+uint64(budget))
	if dead != nil {
		end = p.NextSeq
	}
	var pending []uint64
	es.EachEntry(p.Id, consumed+1, end, func(seq uint64, e msgstore.Entry) bool {
		if len(seqs) == int(budget) {
			return false
		}
		if dead.has(seq) {
			pending = append(pending, seq)
			return true
		}
		if delay > 0 && e.CreatedUs+delay > now {
			return false
		}
		size := int(e.Length)
		if size > *bytesLeft && (len(seqs) > 0 || *bytesLeft < MaxPopBytes) {
			return false
		}
		*bytesLeft -= size
		seqs = append(seqs, seq)
		gaps, pending = append(gaps, pending...), pending[:0]
		return true
	})
	return seqs, gaps
}

// Pop claims up to in.Batch messages for a group from the queue (or the
// namespace's queues), partition by partition: one lease over the run it
// delivers in each partition it claims. popMaintenance answers nothing.
func (t *Tx) Pop(in *command.Pop, popMaintenance bool, rule ConflationRule) *command.PopResult {
	group := in.ConsumerGroup
	if group == "" {
		group = command.QueueModeGroup
	}
	res := &command.PopResult{Queue: in.Queue, ConsumerGroup: group}
	if popMaintenance {
		return res
	}
	budget := max(in.Batch, 1)
	bytesLeft := MaxPopBytes
	maxParts := max(in.Partitions, 1)
	if in.HasPartition {
		maxParts = 1
	}
	for _, qname := range t.popQueues(in) {
		qs := t.queue(qname)
		if qs == nil {
			continue
		}
		// First contact of this group with this queue records where it
		// starts, even if this pop finds nothing (spec §5.7).
		gs := t.registerGroup(qname, group, in.Subscription, in.SubscriptionFromUs)
		if gs.rec.Kafka {
			continue // a Kafka group's (the front ends refuse the pop; apply takes nothing)
		}
		if rule == GroupPolicy && gs.rec.Conflation == command.GroupRecord_CONFLATION_UNSET {
			gs.rec.Conflation = registeredPolicy(qs.rec.Options, in) // a group registered before policies were stored: now
			gs.dirty = true
		}
		conflate := conflation(rule, qs.rec.Options, gs.rec, in, group, res)
		expires := t.now + leaseSeconds(qs.rec.Options, in.LeaseSeconds)*1e6
		claim := func(ps *partState) bool {
			cs := t.cursor(ps.rec.Id, group)
			if cs.fresh && cs.rec.Consumed == 0 {
				cs.rec.Consumed = startConsumed(t.batch, ps.rec, group, gs.rec)
			}
			if ps.rec.Deleted > 0 && !leases.Live(cs.rec.Lease, t.now) {
				t.skipDeleted(qs, ps, cs, group)
			}
			if !evaluate(t.batch, qs.rec, ps.rec, cs.rec, t.now).ok {
				return false
			}
			from := max(cs.rec.Consumed, ps.rec.FirstSeq-1)
			var seqs, gaps []uint64
			if conflate {
				seqs = newest(t.batch, qs.rec, ps.rec, from, &bytesLeft, t.now, func(seq uint64) bool {
					return t.tombstonesFrom(ps, seq).has(seq)
				})
			} else {
				seqs, gaps = deliverable(t.batch, qs.rec, ps.rec, from, budget, &bytesLeft, t.now, t.tombstonesFrom(ps, from+1))
			}
			if len(seqs) == 0 {
				return false
			}
			if old := cs.rec.Lease; old != nil {
				leases.Remove(t.tx, old.LeaseId, ps.rec.Id, group)
			}
			cs.rec.Consumed = max(cs.rec.Consumed, ps.rec.FirstSeq-1)
			cs.rec.RetryVisibleUs = 0
			var oldestUs int64
			if e, err := t.batch.Entry(ps.rec.Id, seqs[0]); err == nil {
				oldestUs = e.CreatedUs
			}
			t.countPop(qname, len(seqs), oldestUs)
			if in.AutoAck {
				t.flow(qname).Consumed += seqs[len(seqs)-1] - cs.rec.Consumed
				t.consumed(qs, group, cs.rec.Consumed, seqs[len(seqs)-1])
				cs.rec.Consumed = seqs[len(seqs)-1]
				cs.rec.Lease = nil
				cs.rec.RetryCount = 0
			} else {
				cs.rec.Lease = leases.Grant(in.LeaseId, t.now, expires, seqs[0], seqs[len(seqs)-1])
				cs.rec.Lease.Acked = gaps // deleted: nothing to ack
				if conflate {
					cs.rec.Lease = leases.GrantConflated(in.LeaseId, t.now, expires, from+1, seqs[0])
				}
				leases.Put(t.tx, leases.Holder{LeaseID: in.LeaseId, PID: ps.rec.Id, Group: group, ExpiresUs: expires})
				res.LeaseExpiresUs = expires
			}
			cs.dirty = true
			for _, s := range seqs {
				res.Messages = append(res.Messages, &command.PoppedMessage{
					PartitionId: ps.rec.Id, Partition: ps.rec.Name, Queue: qname, Seq: s, RetryCount: cs.rec.RetryCount,
				})
			}
			budget -= uint32(len(seqs))
			res.PartitionsClaimed++
			return true
		}
		if in.HasPartition {
			if ps := t.partition(qname, in.Partition); ps != nil {
				claim(ps)
			}
		} else {
			t.eachPartitionFrom(qname, gs.rec.RrAfter, func(ps *partState) bool {
				if claim(ps) {
					gs.rec.RrAfter = ps.rec.Name
					gs.dirty = true
				}
				return res.PartitionsClaimed < maxParts && budget > 0 && bytesLeft > 0
			})
		}
		if res.PartitionsClaimed >= maxParts || budget == 0 || bytesLeft <= 0 {
			break
		}
	}
	if res.PartitionsClaimed > 0 && !in.AutoAck {
		res.LeaseId = in.LeaseId
	}
	if res.Queue == "" && len(res.Messages) > 0 {
		res.Queue = res.Messages[0].Queue
	}
	return res
}

// popQueues lists the queues a pop takes from: its one queue, or for a
// namespace/task pop every matching queue, highest priority first.
func (t *Tx) popQueues(in *command.Pop) []string {
	return popQueues(t.tx, in)
}

func popQueues(r store.Reader, in *command.Pop) []string {
	if in.Queue != "" || in.Namespace == "" {
		return []string{in.Queue}
	}
	type cand struct {
		name     string
		priority int64
	}
	var cands []cand
	cur := r.Cursor(bQueues)
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		rec := &command.QueueRecord{}
		command.MustDecodeRecord(v, rec)
		if rec.Namespace == in.Namespace && (in.Task == "" || rec.Task == in.Task) {
			cands = append(cands, cand{rec.Name, rec.Options.GetPriority()})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].priority > cands[j].priority })
	out := make([]string, len(cands))
	for i, cd := range cands {
		out[i] = cd.name
	}
	return out
}

// eachPartitionFrom visits the queue's partitions in name order, starting
// after `after` and wrapping around, until fn returns false. Starting after
// the last partition the group claimed keeps one busy partition from
// starving the others.
func (t *Tx) eachPartitionFrom(queue, after string, fn func(*partState) bool) {
	pfx := prefix(queue)
	mark := join(queue, after)
	visit := func(from []byte, skipMark bool, inRange func(k []byte) bool) bool {
		cur := t.tx.Cursor(bPartitions)
		for k, v := cur.Seek(from); k != nil && hasPrefix(k, pfx) && inRange(k); k, v = cur.Next() {
			if skipMark && bytes.Equal(k, mark) {
				continue
			}
			ps, ok := t.parts[string(k)]
			if !ok {
				rec := &command.PartitionRecord{}
				command.MustDecodeRecord(v, rec)
				ps = &partState{rec: rec}
				t.cachePartition(string(k), ps)
			}
			if ps != nil && !fn(ps) {
				return false
			}
		}
		return true
	}
	all := func([]byte) bool { return true }
	if after == "" {
		visit(pfx, false, all)
		return
	}
	if !visit(mark, true, all) { // after the mark to the end
		return
	}
	visit(pfx, false, func(k []byte) bool { return bytes.Compare(k, mark) <= 0 }) // wrap around
}

// registerGroup is the group's subscription to the queue, made at its first
// contact (a pop, or a position set in a transaction) from where it asked
// to start.
func (t *Tx) registerGroup(queue, group string, sub command.Pop_Subscription, fromUs int64) *groupState {
	gs := t.group(queue, group)
	if gs.rec != nil {
		return gs
	}
	gs.rec = &command.GroupRecord{CreatedUs: t.now}
	gs.made = true
	switch sub {
	case command.Pop_NEW:
		gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_FROM, t.now
	case command.Pop_FROM:
		gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_FROM, fromUs
	}
	if group == command.QueueModeGroup {
		gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_ALL, 0
	}
	gs.dirty = true
	return gs
}

// ConflationRule is the rule a pop's entry applies (addendum §8), by the
// log format it was written in: replaying an older entry, or a cluster in
// mid-upgrade, applies it as it was applied when it was written.
type ConflationRule uint8

const (
	// QueuePolicy (entries before log format 4): the queue's /configure
	// option, where set, wins over the pop's flag; else each pop decides.
	QueuePolicy ConflationRule = iota
	// GroupPolicy (log format 4 on): the policy is the group's, stored by
	// the pop that registers it (its first), and no later pop changes it.
	GroupPolicy
)

// registeredPolicy is the policy a group's registering pop stores: its
// flag, else the queue's option where one is set, else off.
func registeredPolicy(o *command.QueueOptions, in *command.Pop) command.GroupRecord_Conflation {
	on := o.GetConflation()
	if in.HasConflation {
		on = in.Conflation
	}
	if on {
		return command.GroupRecord_CONFLATION_ON
	}
	return command.GroupRecord_CONFLATION_OFF
}

// conflation decides whether a group's pop conflates in a queue and notes
// in res what the pop is answered with.
func conflation(rule ConflationRule, o *command.QueueOptions, g *command.GroupRecord, in *command.Pop, group string, res *command.PopResult) bool {
	on, echo, conflict := Conflation(rule, o, g, in, group)
	res.ConflationEcho = res.ConflationEcho || echo
	res.Conflation = res.Conflation || on
	res.ConflationConflict = res.ConflationConflict || conflict
	return on
}

// Conflation is the rule of addendum §8: whether a pop of group conflates
// in a queue with options o, where the group's record is g (nil: not
// registered; this pop would register it). Queue mode and autoAck never
// conflate. echo: the answer carries conflation (true: it conflated);
// conflict: the pop's flag differs from the policy that decided.
func Conflation(rule ConflationRule, o *command.QueueOptions, g *command.GroupRecord, in *command.Pop, group string) (on, echo, conflict bool) {
	if rule == QueuePolicy {
		on, echo = in.HasConflation && in.Conflation, in.HasConflation
		if p := o.GetConflation(); o != nil && o.Conflation != nil {
			conflict = in.HasConflation && in.Conflation != p
			on, echo = p, true
		}
	} else {
		policy := registeredPolicy(o, in)
		if g != nil && g.Conflation != command.GroupRecord_CONFLATION_UNSET {
			policy = g.Conflation
		}
		on = policy == command.GroupRecord_CONFLATION_ON
		conflict = in.HasConflation && in.Conflation != on
		echo = in.HasConflation || on
	}
	if group == "" || group == command.QueueModeGroup || in.AutoAck {
		on = false
	}
	return on, echo, conflict
}

// newest is a conflated delivery of p: its newest message after consumed
// that is not deleted, when delayed processing lets it go and the byte
// budget has room (at least one message always goes).
func newest(es entries, q *command.QueueRecord, p *command.PartitionRecord, consumed uint64, bytesLeft *int, now int64,
	deleted func(seq uint64) bool) []uint64 {
	last := p.NextSeq - 1
	for p.Deleted > 0 && last > consumed && deleted(last) {
		last--
	}
	if last <= consumed {
		return nil
	}
	e, err := es.Entry(p.Id, last)
	if err != nil {
		return nil
	}
	if d := q.Options.GetDelayedProcessing() * 1e6; d > 0 && e.CreatedUs+d > now {
		return nil
	}
	if int(e.Length) > *bytesLeft && *bytesLeft < MaxPopBytes {
		return nil
	}
	*bytesLeft -= int(e.Length)
	return []uint64{last}
}
