package queue

import (
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/store"
)

// Consumer-group operations (spec §4.11). Each is one entry: a seek or a
// delete is all or nothing, on every replica at the same point of the log.

// lastCreatedAtOrBefore is the last seq of p created at or before us, or
// FirstSeq-1 when there is none ("before everything"). createdAt grows with
// seq inside a partition, so it is a binary search over the index entries.
func lastCreatedAtOrBefore(es entries, p *command.PartitionRecord, us int64) uint64 {
	begin := p.FirstSeq - 1
	last := p.NextSeq - 1
	if last <= begin {
		return last
	}
	if p.LastCreatedUs <= us {
		return last
	}
	i := sort.Search(int(last-begin), func(i int) bool {
		e, err := es.Entry(p.Id, p.FirstSeq+uint64(i))
		return err != nil || e.CreatedUs > us
	})
	return begin + uint64(i)
}

// moveCursor puts a group's cursor in ps at consumed: its lease there is
// released (a seek voids what was delivered), its retry state and its
// record of recent leases are cleared (an ack under a lease from before the
// seek is refused, never taken as a retried success), and the queue's
// pending count follows the queue-mode cursor both ways.
func (t *Tx) moveCursor(qs *queueState, ps *partState, cs *cursorState, group string, consumed uint64) {
	cur := cs.rec
	before := max(cur.Consumed, ps.rec.FirstSeq-1)
	if cur.Lease != nil {
		leases.Remove(t.tx, cur.Lease.LeaseId, ps.rec.Id, group)
		cur.Lease = nil
	}
	cur.Consumed = consumed
	cur.RetryCount, cur.RetryVisibleUs = 0, 0
	cur.RecentLeases, cur.RecentRuns = nil, nil
	if group == command.QueueModeGroup {
		switch {
		case consumed > before:
			qs.rec.Pending -= min(qs.rec.Pending, consumed-before)
		case consumed < before:
			qs.rec.Pending += before - consumed
		}
		qs.dirty = true
	}
	cs.dirty, cs.fresh = true, false
	t.touch(ps.rec.Queue)
}

// eachPartition calls fn for every partition of queue, in name order.
func (t *Tx) eachPartition(queue string, fn func(*partState)) {
	pfx := prefix(queue)
	var keys []string
	c := t.tx.Cursor(bPartitions)
	for k, _ := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	for _, k := range keys {
		q, p := splitJoined([]byte(k))
		if ps := t.partition(q, p); ps != nil {
			fn(ps)
		}
	}
}

// Seek moves where a group reads a queue (see command.Seek).
func (t *Tx) Seek(in *command.Seek) *command.SeekResult {
	res := &command.SeekResult{}
	qs := t.queue(in.Queue)
	if qs == nil {
		return res
	}
	res.QueueFound = true
	if in.OnePartition {
		ps := t.partition(in.Queue, in.Partition)
		if ps == nil {
			return res
		}
		res.PartitionFound = true
		cs := t.cursor(ps.rec.Id, in.Group)
		t.moveCursor(qs, ps, cs, in.Group, ps.rec.NextSeq-1)
		res.PartitionsUpdated = 1
		if last := ps.rec.NextSeq - 1; last >= ps.rec.FirstSeq {
			res.CursorMovedToUs = ps.rec.LastCreatedUs
		}
		return res
	}
	t.eachPartition(in.Queue, func(ps *partState) {
		cs := t.cursor(ps.rec.Id, in.Group)
		if cs.fresh {
			return // only partitions where the group already reads
		}
		to := ps.rec.NextSeq - 1
		if !in.ToEnd {
			to = lastCreatedAtOrBefore(t.batch, ps.rec, in.TimestampUs)
		}
		t.moveCursor(qs, ps, cs, in.Group, to)
		res.PartitionsUpdated++
	})
	return res
}

// SetPosition sets where a group reads one partition next, or forgets it
// (a transaction's positions, addendum §4.2): the partition is made when
// missing, a group the queue does not know is registered as a first pop
// would register it, and the group's lease there is released. A position
// beyond the partition's end puts the group at the end; one before its
// first message, at its first. A position of a Kafka commit registers a
// Kafka group. ok=false: the queue does not exist; kindConflict: the group
// is of the other kind (a Kafka commit of a Queen group, or the reverse).
func (t *Tx) SetPosition(in *command.PositionOp) (ok, kindConflict bool) {
	qs := t.queue(in.Queue)
	if qs == nil {
		return false, false
	}
	gs := t.registerGroup(in.Queue, in.ConsumerGroup, in.Subscription, in.SubscriptionFromUs)
	if gs.made && in.KafkaGroup {
		gs.rec.Kafka = true
	}
	if gs.rec.Kafka != in.KafkaGroup {
		return true, true
	}
	ps := t.ensurePartition(in.Queue, in.Partition)
	cs := t.cursor(ps.rec.Id, in.ConsumerGroup)
	if in.Forget {
		if cs.fresh {
			return true, false
		}
		t.moveCursor(qs, ps, cs, in.ConsumerGroup, ps.rec.FirstSeq-1)
		cs.dirty = false
		t.tx.Delete(bCursors, cs.key)
		delete(t.cursors, string(cs.key))
		return true, false
	}
	consumed := min(max(in.Offset, 1)-1, ps.rec.NextSeq-1)
	t.moveCursor(qs, ps, cs, in.ConsumerGroup, max(consumed, ps.rec.FirstSeq-1))
	cs.rec.PositionMetadata = in.Metadata
	return true, false
}

// DeleteGroup drops a group's cursors and leases in one queue or in all
// (see command.DeleteGroup).
func (t *Tx) DeleteGroup(in *command.DeleteGroup) *command.DeleteGroupResult {
	res := &command.DeleteGroupResult{}
	queues := []string{in.Queue}
	if in.Queue == "" {
		queues = t.queueNames()
	}
	for _, name := range queues {
		qs := t.queue(name)
		if qs == nil {
			continue
		}
		t.eachPartition(name, func(ps *partState) {
			cs := t.cursor(ps.rec.Id, in.Group)
			if cs.fresh {
				return
			}
			// Back to where a first pop starts, then gone: the pending
			// count of queue mode follows, and the lease leaves the table.
			t.moveCursor(qs, ps, cs, in.Group, ps.rec.FirstSeq-1)
			cs.dirty = false
			t.tx.Delete(bCursors, cs.key)
			delete(t.cursors, string(cs.key))
			res.DeletedPartitions++
		})
		if in.DeleteMetadata {
			if gs := t.group(name, in.Group); gs.rec != nil {
				t.tx.Delete(bGroups, gs.key)
				gs.rec, gs.dirty = nil, false
				res.MetadataDeleted = true
			}
		}
	}
	return res
}

// SetSubscription moves the group's subscription start in every queue it
// is subscribed to (see command.SetSubscription).
func (t *Tx) SetSubscription(in *command.SetSubscription) *command.SetSubscriptionResult {
	res := &command.SetSubscriptionResult{}
	for _, name := range t.queueNames() {
		gs := t.group(name, in.Group)
		if gs.rec == nil {
			continue
		}
		gs.rec.Mode, gs.rec.FromUs = command.GroupRecord_FROM, in.FromUs
		gs.dirty = true
		res.RowsUpdated++
	}
	return res
}

func (t *Tx) queueNames() []string { return queueNames(t.tx) }

// queueNames lists every queue name in key order, which is name order
// (a name's key ends in 0x00).
func queueNames(r store.Reader) []string {
	var names []string
	c := r.Cursor(bQueues)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n, _ := splitJoined(k)
		names = append(names, n)
	}
	return names
}
