package nodeproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/cluster"
)

// WaitVoters waits, for at most within, until the leader's cluster view
// lists exactly the given nodes as voters, each alive and at its own Raft,
// HTTP and gRPC address. Entries of nodes that are gone (not voters, not
// alive: gossip remembers them) do not count; any other entry does.
func (c *Cluster) WaitVoters(ctx context.Context, within time.Duration, want ...*Node) error {
	return poll(ctx, within, 50*time.Millisecond, func(ctx context.Context) error {
		l, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		v, err := l.ClusterView(ctx)
		if err != nil {
			return err
		}
		if err := checkVoters(v, want); err != nil {
			return fmt.Errorf("the leader %s's view: %w", l.ID(), err)
		}
		return nil
	})
}

func checkVoters(v cluster.ClusterView, want []*Node) error {
	wanted := map[string]*Node{}
	for _, n := range want {
		wanted[n.ID()] = n
	}
	found := 0
	for _, nv := range v.Nodes {
		n, ok := wanted[nv.ID]
		if !ok {
			if nv.Voter || nv.Alive {
				return fmt.Errorf("%s is in it and should not be: %+v", nv.ID, nv)
			}
			continue
		}
		a := n.Addrs()
		if !nv.Voter || !nv.Alive || nv.RaftAddr != a.Raft || nv.HTTPAddr != a.HTTP || nv.GRPCAddr != a.GRPC {
			return fmt.Errorf("%s is not a live voter at %+v: %+v", nv.ID, a, nv)
		}
		found++
	}
	if found != len(wanted) {
		return fmt.Errorf("%d of the %d voters wanted: %+v", found, len(wanted), v.Nodes)
	}
	return nil
}

// AddNode starts a new node (the next id) that joins the running cluster
// with the same --bootstrap-expect, and waits until the leader lists it
// and every other node as live voters.
func (c *Cluster) AddNode(ctx context.Context) (*Node, error) {
	c.mu.Lock()
	i := len(c.nodes) + 1
	c.mu.Unlock()
	ns, err := c.makeNodes(i, 1)
	if err != nil {
		return nil, err
	}
	n := ns[0]
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	if err := n.Start(ctx); err != nil {
		return n, err
	}
	return n, c.WaitVoters(ctx, 30*time.Second, c.Nodes()...)
}

// RemoveNode stops n (SIGTERM, up to 30 s) and removes it from the Raft
// configuration through DELETE /api/v1/system/cluster/nodes/{id} on
// another node; then it waits until the leader lists only the remaining
// nodes as voters. A removed node is no longer in Nodes.
func (c *Cluster) RemoveNode(ctx context.Context, n *Node) error {
	if n.Running() {
		if _, _, err := n.Terminate(30 * time.Second); err != nil {
			return err
		}
	}
	err := errors.New("no running node to ask")
	for _, o := range c.Nodes() {
		if o == n || !o.Running() || o.Paused() {
			continue
		}
		status, body, derr := o.Do(ctx, http.MethodDelete, "/api/v1/system/cluster/nodes/"+n.ID(), nil)
		if derr == nil && (status == http.StatusOK || status == http.StatusNotFound) {
			c.mu.Lock()
			c.removed[n] = true
			c.mu.Unlock()
			c.logf("removed %s (via %s)", n.ID(), o.ID())
			return c.WaitVoters(ctx, 30*time.Second, c.Nodes()...)
		}
		err = fmt.Errorf("nodeproc: remove %s via %s: HTTP %d %s %v", n.ID(), o.ID(), status, body, derr)
	}
	return err
}

// Forget drops n from the cluster's nodes without asking anyone: for a node
// lost for good (its machine is gone), which no Raft configuration change
// can remove while the cluster has no quorum. n must not be running.
func (c *Cluster) Forget(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed[n] = true
}
