package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// The cluster harness: three queen-node processes on loopback that find
// each other over gossip (nodeproc.StartCluster), each wrapped as a *node
// of the test, plus the checks a failover test makes (has a restarted node
// rejoined as the follower it was).

// clusterSize is the number of nodes of every test cluster.
const clusterSize = 3

// testCluster is a running three-node cluster. Node i has id "n<i+1>"; its
// data dir and its four addresses survive restarts.
type testCluster struct {
	*nodeproc.Cluster
	t     testing.TB
	nodes []*node
}

// startCluster starts three nodes on fresh data dirs and waits until they
// formed one cluster: every node healthy, all three voters, one leader that
// every node names.
func startCluster(t testing.TB, opts nodeOpts) *testCluster {
	t.Helper()
	pc, err := nodeproc.StartCluster(context.Background(), nodeproc.ClusterConfig{
		Bin: binPath, Dir: t.TempDir(), Nodes: clusterSize, Flags: opts.flags(), Logf: t.Logf, Node: opts.Node})
	if err != nil {
		t.Fatalf("cluster did not start: %v", err)
	}
	c := &testCluster{Cluster: pc, t: t}
	for _, pn := range pc.Nodes() {
		c.nodes = append(c.nodes, testNode(t, pn))
	}
	return c
}

// wrap is the test's node for pn.
func (c *testCluster) wrap(pn *nodeproc.Node) *node {
	for _, n := range c.nodes {
		if n.Node == pn {
			return n
		}
	}
	c.t.Fatalf("node %s is not one of the test's", pn.ID())
	return nil
}

// others lists the running nodes other than the given ones.
func (c *testCluster) others(not ...*node) []*node {
	var out []*node
	for _, n := range c.nodes {
		skip := !n.Running()
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// leader waits until every running node names the same leader, which is
// running; it returns that node.
func (c *testCluster) leader(timeout time.Duration) *node {
	c.t.Helper()
	l, err := c.WaitLeader(context.Background(), timeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.wrap(l)
}

// awaitNewLeader polls the running nodes' cluster views until one of them
// names a leader other than old. It returns that leader's id and how long
// after since it became visible.
func (c *testCluster) awaitNewLeader(old string, since time.Time, timeout time.Duration) (string, time.Duration, error) {
	l, err := c.AwaitNewLeader(context.Background(), old, timeout)
	took := time.Since(since)
	if err != nil {
		return "", took, err
	}
	return l.ID(), took, nil
}

// waitRejoined waits until the restarted node n is a follower of the
// current leader, the leader lists it as a live voter at its old addresses
// (same id, no new member), and n has applied at least what the leader had
// committed when the wait began. It returns how long that took.
func (c *testCluster) waitRejoined(n *node, timeout time.Duration) time.Duration {
	c.t.Helper()
	ctx := context.Background()
	start := time.Now()
	l := c.leader(timeout)
	if l == n {
		c.t.Fatalf("the restarted node %s leads; want it back as a follower", n.ID())
	}
	lv, err := l.ClusterView(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	target := lv.CommitIndex
	ok, detail := pollUntil(timeout, 50*time.Millisecond, func() (bool, string) {
		h, err := n.Health(ctx)
		if err != nil {
			return false, err.Error()
		}
		if h.NodeID != n.ID() || h.Raft.Role != "follower" || h.Raft.LeaderID != l.ID() || h.Raft.Applied < target {
			return false, fmt.Sprintf("%s /health: nodeId %q role %q leaderId %q applied %d (want ≥ %d)",
				n.ID(), h.NodeID, h.Raft.Role, h.Raft.LeaderID, h.Raft.Applied, target)
		}
		return true, ""
	})
	if !ok {
		c.t.Fatalf("node %s did not rejoin within %v: %s", n.ID(), timeout, detail)
	}
	if err := c.WaitVoters(ctx, timeout, c.Nodes()...); err != nil {
		c.t.Fatal(err)
	}
	return time.Since(start)
}

// pollUntil calls cond every `every` until it reports true, for at most
// timeout (and a bounded number of calls). It returns whether cond held and
// cond's last detail.
func pollUntil(timeout, every time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(timeout)
	max := int(timeout/every) + 2
	var last string
	for i := 0; i < max; i++ {
		ok, detail := cond()
		if ok {
			return true, detail
		}
		last = detail
		if !time.Now().Before(deadline) {
			break
		}
		time.Sleep(every)
	}
	return false, last
}

// sendRetry sends a request that is safe to repeat until it gets an answer
// other than a 5xx or a transport error, for at most timeout. It fails the
// test if none came.
func (c *testCluster) sendRetry(n *node, timeout time.Duration, method, path string, body any, hdr map[string]string) *response {
	c.t.Helper()
	var r *response
	var err error
	ok, detail := pollUntil(timeout, 100*time.Millisecond, func() (bool, string) {
		r, err = n.send(10*time.Second, method, path, body, hdr)
		if err != nil {
			return false, err.Error()
		}
		if r.Status >= 500 {
			return false, r.String()
		}
		return true, ""
	})
	if !ok {
		c.t.Fatalf("%s %s on %s: no answer but 5xx/transport errors for %v: %s", method, path, n.ID(), timeout, detail)
	}
	return r
}
