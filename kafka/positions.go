package kafka

import (
	"sort"

	"github.com/queen-node/queen-node/command"
)

// sortPositions orders positions by queue, group and partition, so that an
// entry's content does not depend on map order.
func sortPositions(ps []*command.PositionOp) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.ConsumerGroup != b.ConsumerGroup {
			return a.ConsumerGroup < b.ConsumerGroup
		}
		return a.Partition < b.Partition
	})
}
