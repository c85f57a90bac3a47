package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
)

// reconcile runs on the leader: every live gossip member that is not a
// voter becomes one, a voter that came back on a new address gets it
// updated, and a member that says it is resyncing is a non-voter until it
// says it is done (resync.go). Nothing is ever removed here. A voter that is down is removed
// only by an operator (RemoveServer): removing voters automatically shrinks
// the quorum, and a node that gossip wrongly thinks dead (a partition, a
// long pause) would be dropped from a healthy cluster. Raft already
// tolerates a dead minority, and the operator knows whether it is coming
// back.
func (n *Node) reconcile() {
	if n.members == nil {
		return
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	voters := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		voters[string(s.ID)] = s
	}
	for _, m := range n.members.list() {
		if !m.Alive || m.Raft == "" {
			n.forgetRemoved(m.ID) // gone from gossip: it may join again later
			continue
		}
		if n.wasRemoved(m.ID) {
			continue // removed by the operator while gossip still sees it
		}
		if m.Groups != groupsMeta(n.cfg.Groups) {
			n.warnGroups.Do(func() {
				n.log.Error("a node runs another number of raft groups and is never added: start every node with the same --raft-groups",
					"id", m.ID, "its_groups", max(m.Groups, 1), "ours", max(n.cfg.Groups, 1))
			})
			continue
		}
		s, known := voters[m.ID]
		if m.resyncIn(n.cfg.Group) { // gossip says this group's files there are being rebuilt
			n.demoteResyncing(m, s, known)
			continue
		}
		if known && string(s.Address) == m.Raft && s.Suffrage == raft.Voter {
			continue
		}
		if err := n.checkPeer(m.Raft); err != nil {
			n.log.Warn("not adding a node whose Raft port does not prove a certificate of the cluster CA", "id", m.ID, "addr", m.Raft, "err", err)
			continue
		}
		if err := n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.Raft), 0, 10*time.Second).Error(); err != nil {
			n.log.Warn("adding voter failed; will retry", "id", m.ID, "addr", m.Raft, "err", err)
			continue
		}
		switch {
		case known && s.Suffrage != raft.Voter:
			n.log.Info("promoted a resynced node back to a voter", "id", m.ID)
		case known:
			n.log.Info("updated a voter's address", "id", m.ID, "addr", m.Raft)
		default:
			n.log.Info("added a voter", "id", m.ID, "addr", m.Raft)
		}
	}
}

// demoteResyncing makes a node that says it is resyncing a non-voter
// (resync.go, step 3); one not in the configuration (removed while it was
// damaged) joins as a non-voter, to be rebuilt and promoted like the others.
func (n *Node) demoteResyncing(m Member, s raft.Server, known bool) {
	if !known {
		if err := n.checkPeer(m.Raft); err != nil {
			n.log.Warn("not adding a node whose Raft port does not prove a certificate of the cluster CA", "id", m.ID, "addr", m.Raft, "err", err)
			return
		}
		if err := n.raft.AddNonvoter(raft.ServerID(m.ID), raft.ServerAddress(m.Raft), 0, 10*time.Second).Error(); err != nil {
			n.log.Warn("adding a resyncing node as a non-voter failed; will retry", "id", m.ID, "err", err)
		}
		return
	}
	if s.Suffrage != raft.Voter {
		return
	}
	if err := n.raft.DemoteVoter(raft.ServerID(m.ID), 0, 10*time.Second).Error(); err != nil {
		n.log.Warn("demoting a resyncing node failed; will retry", "id", m.ID, "err", err)
		return
	}
	n.log.Warn("demoted a node that is rebuilding its damaged state to a non-voter until it has caught up", "id", m.ID)
}

// removedIDs are the nodes an operator removed that gossip still saw
// alive: the leader does not add them back until gossip has seen them gone
// (a node being stopped, or decommissioned while still running, would
// otherwise be re-added at once, as the jepsen corrupt fault's heal found).
type removedIDs struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (n *Node) noteRemoved(id string) {
	n.removed.mu.Lock()
	defer n.removed.mu.Unlock()
	if n.removed.ids == nil {
		n.removed.ids = map[string]bool{}
	}
	n.removed.ids[id] = true
}

func (n *Node) wasRemoved(id string) bool {
	n.removed.mu.Lock()
	defer n.removed.mu.Unlock()
	return n.removed.ids[id]
}

func (n *Node) forgetRemoved(id string) {
	n.removed.mu.Lock()
	defer n.removed.mu.Unlock()
	delete(n.removed.ids, id)
}

// ErrUnknownServer: RemoveServer named a node that is not in the
// configuration.
var ErrUnknownServer = errors.New("cluster: no such server in the configuration")

// RemoveServer removes a node from the Raft configuration (an operator's
// decision; see reconcile). It runs on the leader.
func (n *Node) RemoveServer(ctx context.Context, id, actor string) error {
	_, err := route(n, ctx, forwardWrite,
		func() (struct{}, error) { return struct{}{}, n.RemoveServerLocal(ctx, id, actor) },
		func(ctx context.Context, addr string) (struct{}, error) {
			return struct{}{}, n.fwd.RemoveServer(ctx, addr, id, actor)
		})
	return err
}

// RemoveServerLocal removes id if this node leads, and records the
// removal in the audit trail (an entry of its own after the configuration
// change, made by actor).
func (n *Node) RemoveServerLocal(_ context.Context, id, actor string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	found := false
	for _, s := range f.Configuration().Servers {
		found = found || string(s.ID) == id
	}
	if !found {
		return ErrUnknownServer
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", id, mapRaftError(err))
	}
	n.noteRemoved(id)
	n.log.Info("removed a voter", "id", id)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	note := &command.Command{Actor: actor, Body: &command.Command_AuditNote{AuditNote: &command.AuditNote{
		Action: "remove_voter", Detail: fmt.Sprintf("id=%q", id)}}}
	if _, err := n.applyLocal(ctx, note); err != nil {
		n.log.Warn("removed a voter but could not record it in the audit trail", "id", id, "err", err)
	}
	return nil
}

// checkPeer, with peer TLS on, makes a TLS handshake with a node's Raft
// port before it may enter the configuration: a node whose certificate
// the cluster CA did not sign never becomes a voter (it could not
// replicate anyway). Without peer TLS there is nothing to check.
func (n *Node) checkPeer(addr string) error {
	if n.cfg.PeerTLS == nil {
		return nil
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, n.cfg.PeerTLS.ClientConfig())
	if err != nil {
		return err
	}
	return conn.Close()
}
