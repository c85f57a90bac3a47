package queue

import (
	"strconv"

	"github.com/queen-node/queen-node/command"
)

// Topics: how the Kafka listener sees a queue. A queue is a Kafka topic
// when its partitions are named "0".."n-1" (n is the topic's width); any
// other queue is not a topic. The width is fixed when the topic is made
// (MakeTopic): nothing here adds a numbered partition later.

// TopicWidth is the width of a queue with these partitions (in name
// order), and whether the queue is a topic at all.
func TopicWidth(parts []*command.PartitionRecord) (int, bool) {
	if len(parts) == 0 {
		return 0, false
	}
	seen := make([]bool, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p.Name)
		if err != nil || n < 0 || n >= len(parts) || strconv.Itoa(n) != p.Name || seen[n] {
			return 0, false
		}
		seen[n] = true
	}
	return len(parts), true
}

// Topic is the width of queue as a topic: exists=false when there is no
// queue, ok=false when the queue is not a topic.
func (t *Tx) Topic(queue string) (width int, exists, ok bool) {
	if t.queue(queue) == nil {
		return 0, false, false
	}
	var parts []*command.PartitionRecord
	t.eachPartition(queue, func(ps *partState) { parts = append(parts, ps.rec) })
	width, ok = TopicWidth(parts)
	return width, true, ok
}

// MakeTopic makes queue (with an implicit queue's defaults) and its
// partitions "0".."n-1".
func (t *Tx) MakeTopic(queue string, n int) {
	t.ensureQueue(queue)
	for i := range n {
		t.ensurePartition(queue, strconv.Itoa(i))
	}
}

// PartitionNamed is a partition's id and next seq; ok=false when the
// queue has no partition of that name.
func (t *Tx) PartitionNamed(queue, name string) (pid []byte, nextSeq uint64, ok bool) {
	ps := t.partition(queue, name)
	if ps == nil {
		return nil, 0, false
	}
	return ps.rec.Id, ps.rec.NextSeq, true
}

// Room says why the queue cannot take n more messages ("" when it can):
// a Kafka batch is appended whole or not at all.
func (t *Tx) Room(queue string, n int) string {
	qs := t.queue(queue)
	if qs == nil {
		return ""
	}
	if max := qs.rec.Options.GetMaxSize(); max > 0 && qs.rec.Pending+uint64(n) > uint64(max) {
		return "queue " + queue + " cannot take " + strconv.Itoa(n) + " more messages (maxSize " + strconv.FormatInt(int64(max), 10) + ")"
	}
	return ""
}

// PartitionNamed is a partition of queue by name, or nil.
func (rd *Reader) PartitionNamed(queue, name string) *command.PartitionRecord {
	v := rd.r.Get(bPartitions, join(queue, name))
	if v == nil {
		return nil
	}
	p := &command.PartitionRecord{}
	command.MustDecodeRecord(v, p)
	return p
}

// FirstAtOrAfter is the first seq of p appended at or after us (p's
// NextSeq when none is): a Kafka ListOffsets by timestamp, by append time.
func (rd *Reader) FirstAtOrAfter(p *command.PartitionRecord, us int64) uint64 {
	return max(firstCreatedAtOrAfter(rd.msgs, p, us), p.FirstSeq)
}
