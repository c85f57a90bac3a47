package cluster

import (
	"github.com/hashicorp/raft"
)

// RaftStatus is this node's view of Raft, for /health and the cluster view.
type RaftStatus struct {
	Role        string // leader | follower | candidate | shutdown
	LeaderID    string
	LeaderAddr  string
	Term        uint64
	CommitIndex uint64
	Applied     uint64
	LastIndex   uint64
}

// Status reports this node's Raft state.
func (n *Node) Status() RaftStatus {
	addr, id := n.raft.LeaderWithID()
	role := "follower"
	switch n.raft.State() {
	case raft.Leader:
		role = "leader"
	case raft.Candidate:
		role = "candidate"
	case raft.Shutdown:
		role = "shutdown"
	}
	return RaftStatus{
		Role: role, LeaderID: string(id), LeaderAddr: string(addr), Term: n.raft.CurrentTerm(),
		CommitIndex: n.raft.CommitIndex(), Applied: n.fsm.AppliedIndex(), LastIndex: n.raft.LastIndex(),
	}
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }
