package harness

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// AddNode starts a new node that joins the running cluster (with the same
// --bootstrap-expect; the leader adds it as a voter).
func (c *Cluster) AddNode(ctx context.Context) (*Node, error) {
	c.mu.Lock()
	i := len(c.nodes) + 1
	c.mu.Unlock()
	if c.net != nil {
		got, err := c.net.AddNode()
		if err != nil {
			return nil, err
		}
		i = got
	}
	n, err := c.newNode(i)
	if err != nil {
		return nil, err
	}
	if err := c.mountDisk(n); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	if err := c.launch(n); err != nil {
		return nil, err
	}
	return n, c.waitVoter(ctx, n.ID, true, 30*time.Second)
}

// RemoveNode stops a node and removes it from the configuration through an
// operator call on another node.
func (c *Cluster) RemoveNode(ctx context.Context, n *Node) error {
	c.Terminate(n)
	var lastErr error
	for _, other := range c.Nodes() {
		if other == n || !other.Running() || other.Paused() {
			continue
		}
		code, err := c.Post(ctx, other, http.MethodDelete, "/api/v1/system/cluster/nodes/"+n.ID, nil)
		if err == nil && (code == http.StatusOK || code == http.StatusNotFound) {
			c.mu.Lock()
			n.removed = true
			c.mu.Unlock()
			return c.waitVoter(ctx, n.ID, false, 30*time.Second)
		}
		lastErr = fmt.Errorf("remove %s via %s: status %d, %v", n.ID, other.ID, code, err)
	}
	return lastErr
}

func (c *Cluster) waitVoter(ctx context.Context, id string, want bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		leader, err := c.Leader(ctx)
		if err == nil {
			if v, err := c.view(ctx, leader); err == nil {
				is := false
				for _, nv := range v.Nodes {
					if nv.ID == id && nv.Voter {
						is = true
					}
				}
				if is == want {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("harness: %s voter=%v not reached within %v", id, want, within)
}
