package fsm

import (
	"bytes"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/store"
)

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
func startConsumed(r store.Reader, p *command.PartitionRecord, group string, g *command.GroupRecord) uint64 {
	begin := p.FirstSeq - 1
	if group == command.QueueModeGroup || g == nil || g.Mode == command.GroupRecord_ALL {
		return begin
	}
	last := p.NextSeq - 1
	if last <= begin || p.LastCreatedUs <= g.FromUs {
		return last
	}
	// createdAt grows with seq inside a partition: binary search for the
	// last seq created at or before FromUs.
	lo, hi := p.FirstSeq, last // invariant: answer in [lo-1, hi]
	c := r.Cursor(bMessages)
	for lo <= hi {
		mid := lo + (hi-lo)/2
		k, v := c.Seek(messageKey(p.Id, mid))
		if k == nil || !bytes.HasPrefix(k, p.Id) {
			hi = mid - 1
			continue
		}
		if messageCreatedUs(v) <= g.FromUs {
			lo = seqOfMessageKey(k) + 1
		} else {
			hi = mid - 1
		}
	}
	return lo - 1
}

// evaluate decides whether the group can claim p now. cur.Consumed must
// already hold the group's start in p.
func evaluate(r store.Reader, q *command.QueueRecord, p *command.PartitionRecord, cur *command.CursorRecord, now int64) eligibility {
	consumed := cur.Consumed
	if consumed < p.FirstSeq-1 {
		consumed = p.FirstSeq - 1
	}
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
		k, v := r.Cursor(bMessages).Seek(messageKey(p.Id, consumed+1))
		if k != nil && bytes.HasPrefix(k, p.Id) {
			if due := messageCreatedUs(v) + d*1e6; due > now {
				next = max(next, due)
			}
		}
	}
	if next != 0 {
		return eligibility{nextUs: next}
	}
	return eligibility{ok: true}
}

// messageCreatedUs reads created_us from a stored MessageRecord without
// decoding (and copying) the payload.
func messageCreatedUs(v []byte) int64 {
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return 0
		}
		v = v[n:]
		if num == 4 && typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(v)
			return int64(x)
		}
		n = protowire.ConsumeFieldValue(num, typ, v)
		if n < 0 {
			return 0
		}
		v = v[n:]
	}
	return 0
}

// MaxPopBytes bounds the stored size of the messages one pop delivers (at
// least one message always goes), so that batch=10000 over 2 MB payloads
// cannot build a 20 GB answer. It is a constant of the replicated logic:
// every replica must cut the batch at the same message.
const MaxPopBytes = 16 << 20

// deliverable lists up to budget seqs after consumed, in order, stopping at
// the first message still inside delayedProcessing (delay holds the lane)
// and before the byte budget runs out.
func deliverable(r store.Reader, q *command.QueueRecord, p *command.PartitionRecord, consumed uint64, budget uint32, bytesLeft *int, now int64) []uint64 {
	delay := q.Options.GetDelayedProcessing() * 1e6
	var seqs []uint64
	c := r.Cursor(bMessages)
	for k, v := c.Seek(messageKey(p.Id, consumed+1)); k != nil && uint32(len(seqs)) < budget && bytes.HasPrefix(k, p.Id); k, v = c.Next() {
		if delay > 0 && messageCreatedUs(v)+delay > now {
			break
		}
		if len(v) > *bytesLeft && (len(seqs) > 0 || *bytesLeft < MaxPopBytes) {
			break
		}
		*bytesLeft -= len(v)
		seqs = append(seqs, seqOfMessageKey(k))
	}
	return seqs
}

func applyPop(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetPop()
	group := in.ConsumerGroup
	if group == "" {
		group = command.QueueModeGroup
	}
	res := &command.PopResult{Queue: in.Queue, ConsumerGroup: group}
	if c.meta.PopMaintenance {
		return res, true
	}
	budget := max(in.Batch, 1)
	bytesLeft := MaxPopBytes
	maxParts := max(in.Partitions, 1)
	if in.HasPartition {
		maxParts = 1
	}
	for _, qname := range c.popQueues(in) {
		qs := c.queue(qname)
		if qs == nil {
			continue
		}
		gs := c.group(qname, group)
		if gs.rec == nil {
			// First contact of this group with this queue: record where it
			// starts, even if this pop finds nothing (spec §5.7).
			gs.rec = &command.GroupRecord{CreatedUs: c.now}
			switch in.Subscription {
			case command.Pop_NEW:
				gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_FROM, c.now
			case command.Pop_FROM:
				gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_FROM, in.SubscriptionFromUs
			}
			if group == command.QueueModeGroup {
				gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_ALL, 0
			}
			gs.dirty = true
		}
		expires := c.now + leaseSeconds(qs.rec.Options, in.LeaseSeconds)*1e6
		claim := func(ps *partState) bool {
			cs := c.cursor(ps.rec.Id, group)
			if cs.fresh && cs.rec.Consumed == 0 {
				cs.rec.Consumed = startConsumed(c.tx, ps.rec, group, gs.rec)
			}
			if !evaluate(c.tx, qs.rec, ps.rec, cs.rec, c.now).ok {
				return false
			}
			seqs := deliverable(c.tx, qs.rec, ps.rec, max(cs.rec.Consumed, ps.rec.FirstSeq-1), budget, &bytesLeft, c.now)
			if len(seqs) == 0 {
				return false
			}
			if old := cs.rec.Lease; old != nil {
				c.tx.Delete(bLeaseIndex, leaseIndexKey(old.LeaseId, ps.rec.Id, group))
			}
			cs.rec.Consumed = max(cs.rec.Consumed, ps.rec.FirstSeq-1)
			cs.rec.RetryVisibleUs = 0
			if in.AutoAck {
				c.consumed(qs, group, cs.rec.Consumed, seqs[len(seqs)-1])
				cs.rec.Consumed = seqs[len(seqs)-1]
				cs.rec.Lease = nil
				cs.rec.RetryCount = 0
			} else {
				cs.rec.Lease = leases.Grant(in.LeaseId, c.now, expires, seqs[0], seqs[len(seqs)-1])
				c.tx.Put(bLeaseIndex, leaseIndexKey(in.LeaseId, ps.rec.Id, group), u64(uint64(expires)))
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
			if ps := c.partition(qname, in.Partition); ps != nil {
				claim(ps)
			}
		} else {
			c.eachPartitionFrom(qname, gs.rec.RrAfter, func(ps *partState) bool {
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
	return res, true
}

// popQueues lists the queues a pop takes from: its one queue, or for a
// namespace/task pop every matching queue, highest priority first.
func (c *applyCtx) popQueues(in *command.Pop) []string {
	if in.Queue != "" || in.Namespace == "" {
		return []string{in.Queue}
	}
	type cand struct {
		name     string
		priority int64
	}
	var cands []cand
	cur := c.tx.Cursor(bQueues)
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		rec := &command.QueueRecord{}
		mustUnmarshal(v, rec)
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
func (c *applyCtx) eachPartitionFrom(queue, after string, fn func(*partState) bool) {
	pfx := prefix(queue)
	mark := join(queue, after)
	// visit walks keys from `from` while inRange holds; it reports whether
	// fn wants more.
	visit := func(from []byte, skipMark bool, inRange func(k []byte) bool) bool {
		cur := c.tx.Cursor(bPartitions)
		for k, v := cur.Seek(from); k != nil && hasPrefix(k, pfx) && inRange(k); k, v = cur.Next() {
			if skipMark && bytes.Equal(k, mark) {
				continue
			}
			ps, ok := c.parts[string(k)]
			if !ok {
				rec := &command.PartitionRecord{}
				mustUnmarshal(v, rec)
				ps = &partState{rec: rec}
				c.cachePartition(string(k), ps)
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
