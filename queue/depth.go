package queue

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// Depth is what a queue holds for one group (addendum §8): GET
// /api/v1/resources/queues/:queue/depth. Effective counts are what pops
// can deliver: under conflation one message per partition with a backlog.
type Depth struct {
	Pending, PartitionsPending uint64
	Conflation                 *bool // the group's stored policy (false for the worst-cursor view)
	EffectivePending           uint64
	Processing                 uint64
	Ready, PartitionsReady     uint64
	EffectiveReady             uint64
	Partitions                 []PartitionDepth
}

// PartitionDepth is one partition's share of a Depth.
type PartitionDepth struct {
	Partition                   string
	Pending, Processing, Ready  uint64
	ConflatedDeliveryInProgress bool
}

// Depth counts the queue's messages for group at time now; ok=false: no
// such queue. A group with no cursor in a partition counts from where its
// first pop would start there. With group "" it is the figures of the
// named group with the most pending (the worst cursor; queue mode when no
// group has popped the queue), read as a non-conflating group.
func (rd *Reader) Depth(queue, group string, now int64) (d Depth, ok bool) {
	q := rd.Queue(queue)
	if q == nil {
		return d, false
	}
	if group == "" {
		return rd.worstDepth(q, now), true
	}
	g := rd.Group(queue, group)
	policy := command.GroupRecord_CONFLATION_UNSET
	if g != nil {
		policy = g.Conflation
	}
	if policy == command.GroupRecord_CONFLATION_UNSET { // a flag-less first pop would store this
		policy = registeredPolicy(q.Options, &command.Pop{})
	}
	on := policy == command.GroupRecord_CONFLATION_ON
	d = rd.depth(q, group, g, on, now)
	d.Conflation = &on
	return d, true
}

// worstDepth is Depth without a group: the named group with the most
// pending, read as non-conflating.
func (rd *Reader) worstDepth(q *command.QueueRecord, now int64) Depth {
	worst, found := Depth{}, false
	c := rd.r.Cursor(bGroups)
	pfx := prefix(q.Name)
	for k, v := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = c.Next() {
		_, name := splitJoined(k)
		if name == command.QueueModeGroup {
			continue
		}
		g := &command.GroupRecord{}
		command.MustDecodeRecord(v, g)
		if d := rd.depth(q, name, g, false, now); !found || d.Pending > worst.Pending {
			worst, found = d, true
		}
	}
	if !found {
		worst = rd.depth(q, command.QueueModeGroup, rd.Group(q.Name, command.QueueModeGroup), false, now)
	}
	off := false
	worst.Conflation = &off
	return worst
}

// depth counts the queue's messages for group (record g, nil when it never
// popped), conflating or not.
func (rd *Reader) depth(q *command.QueueRecord, group string, g *command.GroupRecord, conflating bool, now int64) (d Depth) {
	for _, p := range rd.Partitions(q.Name) {
		cur := rd.Cursor(p.Id, group)
		if cur == nil {
			cur = &command.CursorRecord{Consumed: startConsumed(rd.msgs, p, group, g)}
		}
		consumed := max(cur.Consumed, p.FirstSeq-1)
		pd := PartitionDepth{Partition: p.Name}
		pd.Pending, _ = liveAfter(rd.r, p, consumed) // deleted messages are nobody's work
		if l := cur.Lease; leases.Live(l, now) && l.LastSeq > consumed {
			pd.Processing = l.LastSeq - consumed - min(uint64(len(l.Acked)), l.LastSeq-consumed)
			pd.ConflatedDeliveryInProgress = l.Conflated
		}
		if evaluate(rd.msgs, q, p, cur, now).ok {
			pd.Ready = pd.Pending - min(pd.Pending, pd.Processing)
		}
		d.Pending += pd.Pending
		d.Processing += pd.Processing
		d.Ready += pd.Ready
		if pd.Pending > 0 {
			d.PartitionsPending++
		}
		if pd.Ready > 0 {
			d.PartitionsReady++
		}
		d.Partitions = append(d.Partitions, pd)
	}
	d.EffectivePending, d.EffectiveReady = d.Pending, d.Ready
	if conflating {
		d.EffectivePending, d.EffectiveReady = d.PartitionsPending, d.PartitionsReady
	}
	return d
}
