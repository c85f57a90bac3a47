package queue

import (
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// GroupQueue is where one consumer group stands in one queue (the
// consumer-group views of spec §4.11).
type GroupQueue struct {
	Group, Queue string
	Subscription *command.GroupRecord // nil: queue mode, or never subscribed
	Partitions   []GroupPartition     // partitions where the group has a cursor, in name order
}

// GroupPartition is a group's cursor in one partition.
type GroupPartition struct {
	Partition   string
	PartitionID []byte
	Consumed    uint64 // every seq <= Consumed is consumed
	Last        uint64 // the newest seq
	Pending     uint64 // live (not deleted) messages after the cursor
	// OldestPendingUs is the createdAt of the first live message after the
	// cursor; 0 when nothing is pending.
	OldestPendingUs int64
	// ConsumedUs is the createdAt of the message the cursor sits on; 0 when
	// it sits before everything still stored.
	ConsumedUs int64
	Lease      *command.Lease // the live lease, or nil
	RetryCount uint32
	Skipped    uint64 // removed by retention before the group consumed them
}

// LagUs is how long the oldest pending message has waited at now.
func (p GroupPartition) LagUs(now int64) int64 {
	if p.OldestPendingUs == 0 || now < p.OldestPendingUs {
		return 0
	}
	return now - p.OldestPendingUs
}

// ConsumerGroups lists where each group stands in each queue, by group then
// queue name; group "" lists every group (queue mode included, under
// command.QueueModeGroup). A group subscribed to a queue without a cursor
// in it yet is listed with no partitions.
func (rd *Reader) ConsumerGroups(group string, now int64) []GroupQueue {
	byKey := map[[2]string]*GroupQueue{}
	get := func(g, q string) *GroupQueue {
		k := [2]string{g, q}
		if gq := byKey[k]; gq != nil {
			return gq
		}
		gq := &GroupQueue{Group: g, Queue: q}
		byKey[k] = gq
		return gq
	}
	gc := rd.r.Cursor(bGroups)
	for k, v := gc.First(); k != nil; k, v = gc.Next() {
		q, g := splitJoined(k)
		if group != "" && g != group {
			continue
		}
		rec := &command.GroupRecord{}
		command.MustDecodeRecord(v, rec)
		get(g, q).Subscription = rec
	}
	for _, q := range rd.QueueNames() {
		for _, p := range rd.Partitions(q) {
			c := rd.r.Cursor(bCursors)
			for k, v := c.Seek(p.Id); k != nil && hasPrefix(k, p.Id); k, v = c.Next() {
				g := string(k[len(p.Id):])
				if group != "" && g != group {
					continue
				}
				cur := &command.CursorRecord{}
				command.MustDecodeRecord(v, cur)
				gq := get(g, q)
				gq.Partitions = append(gq.Partitions, rd.groupPartition(p, cur, now))
			}
		}
	}
	out := make([]GroupQueue, 0, len(byKey))
	for _, gq := range byKey {
		out = append(out, *gq)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

func (rd *Reader) groupPartition(p *command.PartitionRecord, cur *command.CursorRecord, now int64) GroupPartition {
	gp := GroupPartition{Partition: p.Name, PartitionID: p.Id, Consumed: max(cur.Consumed, p.FirstSeq-1),
		Last: p.NextSeq - 1, RetryCount: cur.RetryCount, Skipped: cur.Skipped}
	gp.Consumed = min(gp.Consumed, gp.Last)
	// deleted messages are nobody's work: lag counts what is live
	var first uint64
	gp.Pending, first = liveAfter(rd.r, p, gp.Consumed)
	if gp.Pending > 0 {
		if e, err := rd.msgs.Entry(p.Id, first); err == nil {
			gp.OldestPendingUs = e.CreatedUs
		}
	}
	if gp.Consumed >= p.FirstSeq {
		if e, err := rd.msgs.Entry(p.Id, gp.Consumed); err == nil {
			gp.ConsumedUs = e.CreatedUs
		}
	}
	if leases.Live(cur.Lease, now) {
		gp.Lease = cur.Lease
	}
	return gp
}
