package cluster

import (
	"time"

	"github.com/queen-node/queen-node/raftlog"
)

// fastTuning shortens Raft's timers so that tests elect leaders quickly.
func fastTuning() raftlog.Tuning {
	return raftlog.Tuning{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond}
}
