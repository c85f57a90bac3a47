package queue

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// A queue's counts, as every read view shows them (the resources, the
// status pages, the depth gauges): its partitions' queue-mode counts summed,
// plus the dead letters it stores. The front ends shape these; they do not
// sum partitions themselves.

// QueueCounts are a queue's message counts.
type QueueCounts struct {
	// Totals sums the partitions' counts; its DeadLetter is the queue's
	// dead letters (every consumer group's), which no partition counts.
	Totals PartitionStats
	// Partitions are the queue's partitions in name order, each with its
	// own counts (DeadLetter 0).
	Partitions []PartitionCounts
}

// PartitionCounts is one partition and its counts.
type PartitionCounts struct {
	Partition *command.PartitionRecord
	Stats     PartitionStats
}

// Counts counts queue q's messages at time now.
func (rd *Reader) Counts(q *command.QueueRecord, now int64) QueueCounts {
	var c QueueCounts
	for _, p := range rd.Partitions(q.Name) {
		st := rd.Stats(p, now)
		c.Totals.Add(st)
		c.Partitions = append(c.Partitions, PartitionCounts{Partition: p, Stats: st})
	}
	c.Totals.DeadLetter = q.DlqCount
	return c
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
	if p.Deleted > 0 { // deleted messages no queue-mode pop has passed yet are not pending
		st.Total -= min(st.Total, p.Deleted)
		st.Pending -= min(st.Pending, rd.deletedAfter(p, consumed))
	}
	return st
}

// deletedAfter counts p's tombstones above seq.
func (rd *Reader) deletedAfter(p *command.PartitionRecord, seq uint64) uint64 {
	var n uint64
	c := rd.r.Cursor(bDeleted)
	for k, _ := c.Seek(tombKey(p.Id, seq+1)); k != nil && hasPrefix(k, p.Id); k, _ = c.Next() {
		n++
	}
	return n
}

// OldestCreatedUs is when partition p's oldest stored message was created; 0
// when it holds none.
func (rd *Reader) OldestCreatedUs(p *command.PartitionRecord) int64 {
	if p.Count == 0 {
		return 0
	}
	if m := rd.Message(p.Id, p.FirstSeq); m != nil {
		return m.CreatedUs
	}
	return 0
}
