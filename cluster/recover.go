package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/raftlog"
)

// Recover is the way back from losing quorum for good (README,
// "Operations"): on a stopped node whose peers are gone, it rewrites the
// node's Raft configuration to this node alone with hashicorp/raft's
// RecoverCluster, which also replays every entry of the node's log into its
// state. Started again, the node is a one-voter cluster that has everything
// it had applied (and whatever else its log held); new nodes then join it
// as usual. Run it only when the other voters will never come back: two
// recovered nodes of one cluster would each accept writes. A data dir of
// several Raft groups (--raft-groups) is recovered group by group, every
// group it holds; lastIndex is group 0's.
func Recover(cfg Config) (lastIndex uint64, err error) {
	if cfg.NodeID == "" {
		return 0, errors.New("cluster: recover: node id is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return 0, err
	}
	groups, err := heldRaftGroups(cfg.DataDir)
	if err != nil {
		return 0, err
	}
	if groups == 1 {
		return recoverGroup(cfg, nil)
	}
	mux, err := raftlog.NewMux(cfg.RaftAddr, cfg.RaftAdvertise, groups, nil, nil, newHCLogger(cfg.Logger, "raft"))
	if err != nil {
		return 0, err
	}
	defer mux.Close()
	for g := groups - 1; g >= 0; g-- {
		gc := cfg
		gc.Group, gc.Groups, gc.Layer = g, groups, func() raft.StreamLayer { return mux.Layer(g) }
		gc.Logger = cfg.Logger.With("group", g)
		if g > 0 {
			gc.DataDir = filepath.Join(cfg.DataDir, "groups", strconv.Itoa(g))
		}
		last, err := recoverGroup(gc, mux)
		if err != nil {
			return 0, fmt.Errorf("raft group %d: %w", g, err)
		}
		lastIndex = last
	}
	return lastIndex, nil
}

// recoverGroup recovers one group's data dir (cfg.DataDir) over
// cfg.Layer when a mux carries the groups, else over its own listener.
func recoverGroup(cfg Config, mux *raftlog.Mux) (uint64, error) {
	log := cfg.Logger.With("component", "recover", "node", cfg.NodeID)
	db, msgs, err := openState(cfg.DataDir, false, cfg.BootID, log)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	defer msgs.Close()
	f, err := fsm.New(db, msgs, fsm.Options{Logger: cfg.Logger, LogID: fsm.GroupLogID(cfg.Group)})
	if err != nil {
		return 0, err
	}
	hlog := newHCLogger(cfg.Logger, "raft")
	rcfg := raftlog.Config{Dir: filepath.Join(cfg.DataDir, "raft"), BindAddr: cfg.RaftAddr,
		AdvertiseAddr: cfg.RaftAdvertise, Logger: hlog, Log: cfg.RaftLog}
	if mux != nil {
		rcfg.Layer = layerOf(cfg)
	}
	stores, err := raftlog.Open(rcfg)
	if err != nil {
		return 0, err
	}
	defer stores.Close()
	self := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: stores.Transport.LocalAddr()}
	conf := raft.Configuration{Servers: []raft.Server{self}}
	rc := raftlog.RaftConfig(cfg.NodeID, cfg.Tuning, hlog)
	rf := &releasingFSM{FSM: f}
	err = raft.RecoverCluster(rc, rf, stores.Log, stores.Stable, stores.Snapshots, stores.Transport, conf)
	rf.release()
	if err != nil {
		return 0, fmt.Errorf("cluster: recover: %w", err)
	}
	meta, snap, err := stores.LatestSnapshot()
	if err != nil || meta == nil {
		return 0, fmt.Errorf("cluster: recover: no snapshot after recovery: %v", err)
	}
	snap.Close()
	log.Warn("recovered: this node is now the only voter of its cluster", "raft_addr", self.Address, "last_index", meta.Index,
		"applied", f.AppliedIndex())
	return meta.Index, nil
}

// releasingFSM releases the snapshots RecoverCluster takes and persists
// (it never does: a running Raft would), which hold the state file open.
type releasingFSM struct {
	*fsm.FSM
	snaps []raft.FSMSnapshot
}

func (r *releasingFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := r.FSM.Snapshot()
	if err == nil {
		r.snaps = append(r.snaps, s)
	}
	return s, err
}

func (r *releasingFSM) release() {
	for _, s := range r.snaps {
		s.Release()
	}
}
