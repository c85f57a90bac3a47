package cluster

import (
	"context"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/fsm"
)

// RaftStatus is this node's view of Raft, for /health and the cluster view.
type RaftStatus struct {
	Role       string // leader | follower | candidate | shutdown
	LeaderID   string
	LeaderAddr string
	// LeaderHTTP and LeaderGRPC are where clients reach the leader's APIs
	// (its advertised addresses, as gossip carries them; "" = unknown), so
	// that a client that can learn them sends its writes there directly.
	LeaderHTTP, LeaderGRPC string
	Term                   uint64
	CommitIndex            uint64
	Applied                uint64 // handed to the FSM by Raft
	LastIndex              uint64
	// StateApplied is the last entry the state holds (it trails Applied
	// while apply waits, e.g. for disk space).
	StateApplied uint64
	// The rest of the 2.x raft object of /health (addendum §4.13):
	StorageReady   bool     // the state machine applies (apply neither paused nor halted)
	ClusterVersion uint32   // the log format this node writes
	Kinds          int      // the kinds of command its state machine applies
	ApplyFailure   string   // why apply stands still, "" when it does not
	Skipped        []uint64 // entries skipped as of a kind this node does not know
	// Damage is the first damage this node found in its own files and how
	// many reads found some (nil: none): package damage.
	Damage *DamageStatus
	// Resync is the rebuild from the leader in progress (nil: none); Damage
	// then says what started it.
	Resync *ResyncStatus
}

// DamageStatus is what /health says of a damaged node.
type DamageStatus struct {
	damage.Finding
	Count uint64
}

// LoadStatus is what admission sees (cluster/admission.go).
type LoadStatus struct {
	InFlight, MaxInflight int
	DiskFreeBytes         uint64
	DiskLow               bool // writes that add data are refused
	ApplyPaused           bool // apply waits for disk space
}

// StateHash digests this node's replicated state as of the entry it
// applied last (fsm.StateHash): replicas at the same index must agree.
func (n *Node) StateHash() (applied uint64, hash string, err error) { return n.fsm.StateHash() }

// Load reports this node's admission state.
func (n *Node) Load() LoadStatus {
	return LoadStatus{InFlight: len(n.slots), MaxInflight: cap(n.slots), DiskFreeBytes: n.disk.FreeBytes(),
		DiskLow: n.disk.Low(), ApplyPaused: n.disk.Paused()}
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
	st := RaftStatus{
		Role: role, LeaderID: string(id), LeaderAddr: string(addr), Term: n.raft.CurrentTerm(),
		CommitIndex: n.raft.CommitIndex(), Applied: n.raft.AppliedIndex(), LastIndex: n.raft.LastIndex(),
		StateApplied: n.fsm.AppliedIndex(), ClusterVersion: command.LogFormat, Kinds: fsm.Kinds(), Skipped: n.fsm.Skipped(),
	}
	first, count, damaged := n.damage.Damaged()
	if damaged {
		st.Damage = &DamageStatus{Finding: first, Count: count}
	}
	if rs := n.resyncing(); rs != nil {
		st.Resync = n.resyncStatus()
		if !damaged {
			st.Damage = &DamageStatus{Finding: damage.Finding{Where: rs.marker.Where, Reason: rs.marker.Reason, At: rs.marker.At}}
		}
	}
	switch {
	case n.fsm.Halted() && damaged:
		st.ApplyFailure = "halted: damaged files (" + first.Where + "): " + first.Reason
	case n.fsm.Halted():
		st.ApplyFailure = "halted: the node is stopping with its data disk full"
	case n.disk.Paused():
		st.ApplyFailure = "paused: waiting for space on the data disk"
	}
	st.StorageReady = st.ApplyFailure == ""
	st.LeaderHTTP, st.LeaderGRPC = n.clientAddrs(st.LeaderID)
	return st
}

// clientAddrs are the advertised HTTP and gRPC addresses of node id.
func (n *Node) clientAddrs(id string) (http, grpc string) {
	switch {
	case id == "":
		return "", ""
	case id == n.cfg.NodeID:
		return n.cfg.HTTPAdvertise, n.cfg.GRPCAdvertise
	case n.members != nil:
		if m, ok := n.members.byID(id); ok {
			return m.HTTP, m.GRPC
		}
	}
	return "", ""
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// NodeView is one node in the cluster view.
type NodeView struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	GRPCAddr string `json:"grpcAddr"`
	// KafkaAddr is where Kafka clients reach the node ("" = its Kafka
	// listener is off).
	KafkaAddr string `json:"kafkaAddr,omitempty"`
	State     string `json:"state"` // leader | follower | candidate | joining | unknown
	Voter     bool   `json:"voter"`
	Alive     bool   `json:"alive"`
}

// ClusterView is GET /api/v1/system/cluster: this node's view of the
// cluster. Voters come from the Raft configuration (the truth), addresses
// and liveness from gossip.
type ClusterView struct {
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"httpAddr"`
	} `json:"leader"`
	Nodes        []NodeView `json:"nodes"`
	Term         uint64     `json:"term"`
	CommitIndex  uint64     `json:"commitIndex"`
	AppliedIndex uint64     `json:"appliedIndex"`
}

// Cluster reports the cluster view.
func (n *Node) Cluster() ClusterView {
	st := n.Status()
	var v ClusterView
	v.Term, v.CommitIndex, v.AppliedIndex = st.Term, st.CommitIndex, st.Applied
	v.Leader.ID = st.LeaderID
	gossip := map[string]Member{}
	if n.members != nil {
		for _, m := range n.members.list() {
			gossip[m.ID] = m
		}
	} else {
		gossip[n.cfg.NodeID] = Member{meta: meta{ID: n.cfg.NodeID, HTTP: n.cfg.HTTPAdvertise, GRPC: n.cfg.GRPCAdvertise, Kafka: n.cfg.KafkaAdvertise}, Alive: true}
	}
	seen := map[string]bool{}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			id := string(s.ID)
			seen[id] = true
			m, known := gossip[id]
			nv := NodeView{ID: id, RaftAddr: string(s.Address), HTTPAddr: m.HTTP, GRPCAddr: m.GRPC, KafkaAddr: m.Kafka,
				Voter: s.Suffrage == raft.Voter, Alive: known && m.Alive, State: "follower"}
			switch {
			case id == n.cfg.NodeID:
				nv.State, nv.Alive = st.Role, true
			case id == st.LeaderID:
				nv.State = "leader"
			case !nv.Alive:
				nv.State = "unknown"
			}
			v.Nodes = append(v.Nodes, nv)
		}
	}
	for id, m := range gossip {
		if !seen[id] {
			v.Nodes = append(v.Nodes, NodeView{ID: id, RaftAddr: m.Raft, HTTPAddr: m.HTTP, GRPCAddr: m.GRPC, KafkaAddr: m.Kafka, State: "joining", Alive: m.Alive})
		}
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].ID < v.Nodes[j].ID })
	if m, ok := gossip[st.LeaderID]; ok {
		v.Leader.HTTPAddr = m.HTTP
	}
	return v
}

// PartitionQueue is the queue a partition id belongs to: this node's
// state first, then, for a partition it has not applied yet, a
// linearizable read. Ids are never reused, so a found answer stays true.
func (n *Node) PartitionQueue(ctx context.Context, pid []byte) (string, bool) {
	var q string
	find := func(r *fsm.Reader) error {
		if p := r.PartitionByID(pid); p != nil {
			q = p.Queue
		}
		return nil
	}
	if _ = n.Read(ctx, Stale, find); q != "" {
		return q, true
	}
	_ = n.Read(ctx, Linearizable, find)
	return q, q != ""
}

// LeaseQueues resolves a lease id to the queues of the partitions it
// holds (for a scope check), as PartitionQueue does a partition; false
// when no partition is held under it.
func (n *Node) LeaseQueues(ctx context.Context, leaseID string) ([]string, bool) {
	var qs []string
	find := func(r *fsm.Reader) error { qs = r.LeaseQueues(leaseID); return nil }
	if _ = n.Read(ctx, Stale, find); len(qs) > 0 {
		return qs, true
	}
	_ = n.Read(ctx, Linearizable, find)
	return qs, len(qs) > 0
}
