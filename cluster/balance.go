package cluster

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Leaders spread over the voters (--raft-groups): group g's preferred
// leader is the (g mod k)-th of its k live voters in id order. The choice
// is a pure function of the configuration and of who gossip sees alive,
// so every node agrees on it without a word; after a failover or a join
// the preference moves with the voter set, and the node leading a group it
// should not hands leadership to the preferred voter (hashicorp/raft
// brings that voter up to date first). Each node thus leads about
// groups/voters groups. A transfer in flight refuses new entries with
// ErrLeadershipTransferInProgress, which applyLocal waits out (and only
// that error), so nothing is refused while leadership moves.

// transferPause is how long a group waits after one transfer before it
// may try another: a new leader settles, and a voter that cannot take
// over is not asked again and again.
const transferPause = 10 * time.Second

func (gs *Groups) balanceLoop() {
	defer gs.wg.Done()
	tick := time.NewTicker(balanceInterval)
	defer tick.Stop()
	last := make([]time.Time, len(gs.nodes))
	for {
		select {
		case <-gs.stop:
			return
		case <-tick.C:
		}
		for g, n := range gs.nodes {
			if time.Since(last[g]) < transferPause {
				continue
			}
			if n.balanceLeadership() {
				last[g] = time.Now()
			}
		}
	}
}

// preferredLeader is the voter that should lead this group, or false when
// the node cannot tell (no gossip, no configuration).
func (n *Node) preferredLeader() (raft.Server, bool) {
	if n.members == nil {
		return raft.Server{}, false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Server{}, false
	}
	var live []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		if string(s.ID) != n.cfg.NodeID {
			m, ok := n.members.byID(string(s.ID))
			if !ok || !m.Alive || m.Stopping || m.resyncIn(n.cfg.Group) {
				continue
			}
		}
		live = append(live, s)
	}
	if len(live) == 0 {
		return raft.Server{}, false
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	return live[n.cfg.Group%len(live)], true
}

// balanceLeadership hands this group's leadership to its preferred leader
// when this node leads it and another voter is preferred; it reports
// whether it tried.
func (n *Node) balanceLeadership() bool {
	if !n.ready.Load() || n.raft.State() != raft.Leader {
		return false
	}
	want, ok := n.preferredLeader()
	if !ok || string(want.ID) == n.cfg.NodeID {
		return false
	}
	start := time.Now()
	if err := n.raft.LeadershipTransferToServer(want.ID, want.Address).Error(); err != nil {
		n.log.Warn("handing the group's leadership to its preferred voter failed; will retry", "to", want.ID, "err", err)
		return true
	}
	n.m.leaderTransfers.Inc()
	n.log.Info("handed the group's leadership to its preferred voter", "to", want.ID, "took", time.Since(start))
	return true
}
