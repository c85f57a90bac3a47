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
	Conflation                 *bool // the queue's stored policy; nil = each pop decides
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

// Depth counts the queue's messages for group ("" = queue mode) at time
// now; ok=false: no such queue. A group with no cursor in a partition
// counts from where its first pop would start there.
func (rd *Reader) Depth(queue, group string, now int64) (d Depth, ok bool) {
	q := rd.Queue(queue)
	if q == nil {
		return d, false
	}
	if group == "" {
		group = command.QueueModeGroup
	}
	var g *command.GroupRecord
	if v := rd.r.Get(bGroups, join(queue, group)); v != nil {
		g = &command.GroupRecord{}
		command.MustDecodeRecord(v, g)
	}
	d.Conflation = q.Options.Conflation
	conflating := d.Conflation != nil && *d.Conflation && group != command.QueueModeGroup
	for _, p := range rd.Partitions(queue) {
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
	return d, true
}
