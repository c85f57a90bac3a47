package cluster

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Bootstrapping follows Consul's bootstrap-expect: a node with no Raft state
// waits until gossip shows `expect` live nodes that were started with the
// same expectation and none of which already has Raft state; then the
// `expect` nodes with the smallest ids each bootstrap the same one
// configuration (identical bootstraps on several nodes are harmless). A
// node that finds a member with state (a cluster exists) never bootstraps:
// it waits for the leader to add it. So one command line serves a first
// start, a restart (the node has state: nothing to do) and a fourth or
// fifth node joining later.

func (n *Node) maybeBootstrap() error {
	has, err := n.stores.HasState()
	if err != nil || has {
		return err
	}
	switch {
	case n.cfg.Group > 0:
		return nil // bootstrapped with group 0 (OnBootstrap), or added by its leader
	case n.cfg.BootstrapExpect == 1:
		return n.bootstrap([]raft.Server{{ID: raft.ServerID(n.cfg.NodeID), Address: n.stores.Transport.LocalAddr(), Suffrage: raft.Voter}})
	case n.members != nil:
		n.wg.Add(1)
		go n.bootstrapLoop()
	}
	return nil
}

func (n *Node) bootstrap(servers []raft.Server) error {
	cfg := raft.Configuration{Servers: servers}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	n.log.Info("bootstrapped the cluster", "voters", ids)
	if n.cfg.OnBootstrap != nil {
		n.cfg.OnBootstrap(servers)
	}
	return nil
}

func (n *Node) bootstrapLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		case <-n.members.changed:
		}
		if n.raft.LastIndex() > 0 {
			return // added by a leader, or bootstrapped
		}
		servers, ok := n.bootstrapSet()
		if !ok {
			continue
		}
		if err := n.bootstrap(servers); err != nil {
			n.log.Warn("bootstrap failed; will retry", "err", err)
			continue
		}
		return
	}
}

// bootstrapSet decides whether this node should bootstrap now, and with
// which voters.
func (n *Node) bootstrapSet() ([]raft.Server, bool) {
	var peers []Member
	for _, m := range n.members.list() {
		if m.Boot {
			return nil, false // a cluster exists: wait to be added
		}
		if !m.Alive || m.Expect != n.cfg.BootstrapExpect {
			continue
		}
		peers = append(peers, m)
	}
	if len(peers) < n.cfg.BootstrapExpect {
		return nil, false
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	peers = peers[:n.cfg.BootstrapExpect]
	var servers []raft.Server
	self := false
	for _, p := range peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Raft), Suffrage: raft.Voter})
		self = self || p.ID == n.cfg.NodeID
	}
	return servers, self
}

// gossipLoop keeps this node in the gossip pool (re-joining while it is
// alone, for instance after a restart before the others are back) and
// tells the others when it has Raft state.
func (n *Node) gossipLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if n.raft.LastIndex() > 0 {
			n.members.setBoot()
		}
		n.compareChecks()
		if len(n.cfg.Join) > 0 && n.members.ml.NumMembers() < 2 {
			if _, err := n.members.ml.Join(n.cfg.Join); err != nil {
				n.log.Debug("gossip join failed; retrying", "err", err)
			}
		}
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
	}
}
