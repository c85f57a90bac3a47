package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cluster harness: three queen-node processes on loopback that find
// each other over gossip (--join, --bootstrap-expect 3), plus the probes a
// failover test needs (who leads, when a new leader shows, has a restarted
// node rejoined). It builds on the single-node harness (harness_test.go):
// each process is a *node, killed and restarted by PID the same way.

// clusterSize is the number of nodes of every test cluster.
const clusterSize = 3

// testCluster is a running three-node cluster. Node i has id "n<i+1>"; its
// data dir and its four addresses survive restarts.
type testCluster struct {
	t     testing.TB
	nodes []*node
}

// clusterAddrs reserves the four listener addresses (http, raft, grpc,
// gossip) of n nodes in one go, so no port repeats across the cluster. Every
// listener is held until all are chosen; a gossip port is also bound on UDP
// (memberlist uses both), and a port whose UDP twin is taken is skipped.
// The ports are released before the nodes bind them (a small race the
// harness accepts, as freePorts does).
func clusterAddrs(t testing.TB, n int) [][4]string {
	t.Helper()
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	out := make([][4]string, n)
	for i := range out {
		for j := 0; j < 4; j++ {
			for try := 0; ; try++ {
				if try == 50 {
					t.Fatalf("no free loopback port with a free UDP twin after %d tries", try)
				}
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatalf("free port: %v", err)
				}
				if j == 3 {
					pc, err := net.ListenPacket("udp", l.Addr().String())
					if err != nil {
						held = append(held, l) // keep it so it is not drawn again
						continue
					}
					held = append(held, pc)
				}
				held = append(held, l)
				out[i][j] = l.Addr().String()
				break
			}
		}
	}
	return out
}

// newClusterNode prepares (does not start) cluster node id with the given
// addresses. Like startNode, it kills the process when the test ends and
// prints its log if the test failed.
func newClusterNode(t testing.TB, base, id string, addrs [4]string, join string, opts nodeOpts) *node {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	// The flags of args() come first; a flag given twice takes its last
	// value, so these override its --bootstrap-expect 1.
	extra := append([]string{}, opts.Extra...)
	opts.Extra = append(extra, "--bootstrap-expect", fmt.Sprint(clusterSize), "--join", join)
	n := &node{
		t: t, id: id, dataDir: filepath.Join(base, id, "data"), logPath: filepath.Join(base, id+".log"),
		opts: opts, httpAddr: addrs[0], raftAddr: addrs[1], grpcAddr: addrs[2], gossipAddr: addrs[3],
		tr: tr, client: &http.Client{Transport: tr, Timeout: 20 * time.Second},
	}
	t.Cleanup(func() {
		n.mu.Lock()
		running := n.cmd != nil && !isClosed(n.done)
		unexpected := n.cmd != nil && isClosed(n.done) && !n.expected
		werr := n.waitErr
		n.mu.Unlock()
		if running {
			n.kill9()
		}
		if unexpected {
			t.Errorf("node %s exited on its own (not stopped by the test): %v", n.id, werr)
		}
		tr.CloseIdleConnections()
		if t.Failed() {
			n.dumpLog()
		}
	})
	return n
}

// startCluster starts three nodes on fresh data dirs and waits until they
// formed one cluster: every node healthy, all three voters, one leader that
// every node names. A start that lost a port race is retried on new ports.
func startCluster(t testing.TB, opts nodeOpts) *testCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		base := t.TempDir()
		addrs := clusterAddrs(t, clusterSize)
		gossip := make([]string, clusterSize)
		for i, a := range addrs {
			gossip[i] = a[3]
		}
		join := strings.Join(gossip, ",")
		c := &testCluster{t: t}
		for i := range addrs {
			c.nodes = append(c.nodes, newClusterNode(t, base, fmt.Sprintf("n%d", i+1), addrs[i], join, opts))
		}
		start := time.Now()
		for _, n := range c.nodes {
			n.launch()
		}
		var err error
		for _, n := range c.nodes {
			if err = n.healthy(30 * time.Second); err != nil {
				break
			}
		}
		if err != nil {
			portRace := false
			for _, n := range c.nodes {
				portRace = portRace || (n.exited() && n.logSince(0, "address already in use"))
			}
			if portRace && attempt < 3 {
				t.Logf("cluster start %d lost a port race; retrying on new ports", attempt)
				for _, n := range c.nodes {
					n.kill9()
				}
				continue
			}
			t.Fatalf("cluster did not start: %v", err)
		}
		l := c.leader(30 * time.Second)
		if err := c.waitVoters(l, 20*time.Second, c.nodes...); err != nil {
			t.Fatal(err)
		}
		t.Logf("cluster of %d formed in %v; leader %s", clusterSize, time.Since(start).Round(time.Millisecond), l.id)
		return c
	}
}

// ---------------------------------------------------------------------------
// Views of the cluster, as the HTTP API shows them.

// clusterView is GET /api/v1/system/cluster.
type clusterView struct {
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"httpAddr"`
	} `json:"leader"`
	Nodes []struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raftAddr"`
		HTTPAddr string `json:"httpAddr"`
		GRPCAddr string `json:"grpcAddr"`
		State    string `json:"state"`
		Voter    bool   `json:"voter"`
		Alive    bool   `json:"alive"`
	} `json:"nodes"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

// healthView is GET /health (200 or 503: both carry the raft object).
type healthView struct {
	Status string `json:"status"`
	NodeID string `json:"nodeId"`
	Raft   struct {
		Role     string `json:"role"`
		Leader   bool   `json:"leader"`
		LeaderID string `json:"leaderId"`
		Term     uint64 `json:"term"`
		Applied  uint64 `json:"applied"`
		Commit   uint64 `json:"commit"`
		Lag      uint64 `json:"lag"`
	} `json:"raft"`
}

// getJSON runs one GET with a short deadline and decodes the body, whatever
// the status (a 503 /health still has a body).
func (n *node) getJSON(path string, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := n.do(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("GET %s on %s: %s: %v", path, n.id, r, err)
	}
	return nil
}

func (n *node) clusterView() (clusterView, error) {
	var v clusterView
	err := n.getJSON("/api/v1/system/cluster", time.Second, &v)
	return v, err
}

func (n *node) health() (healthView, error) {
	var v healthView
	err := n.getJSON("/health", time.Second, &v)
	return v, err
}

// running lists the nodes whose process is up.
func (c *testCluster) running() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.isUp() {
			out = append(out, n)
		}
	}
	return out
}

// isUp reports whether n's process was started and has not exited.
func (n *node) isUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !isClosed(n.done)
}

func (c *testCluster) byID(id string) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// others lists the running nodes other than the given ones.
func (c *testCluster) others(not ...*node) []*node {
	var out []*node
	for _, n := range c.running() {
		skip := false
		for _, x := range not {
			skip = skip || x == n
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
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

// leader waits until every running node names the same leader and that
// node's own view says it leads; it returns that node.
func (c *testCluster) leader(timeout time.Duration) *node {
	c.t.Helper()
	var l *node
	ok, detail := pollUntil(timeout, 25*time.Millisecond, func() (bool, string) {
		l = nil
		var seen []string
		id := ""
		for _, n := range c.running() {
			v, err := n.clusterView()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", n.id, err)
			}
			seen = append(seen, n.id+"→"+v.Leader.ID)
			if v.Leader.ID == "" || (id != "" && v.Leader.ID != id) {
				return false, strings.Join(seen, " ")
			}
			id = v.Leader.ID
		}
		ln := c.byID(id)
		if ln == nil || ln.exited() {
			return false, strings.Join(seen, " ") + " (the named leader is not running)"
		}
		h, err := ln.health()
		if err != nil || h.Raft.Role != "leader" {
			return false, fmt.Sprintf("%s; %s says role %q (%v)", strings.Join(seen, " "), id, h.Raft.Role, err)
		}
		l = ln
		return true, ""
	})
	if !ok {
		c.t.Fatalf("no leader all running nodes agree on after %v: %s", timeout, detail)
	}
	return l
}

// awaitNewLeader polls the running nodes' cluster views until one of them
// names a leader other than old. It returns that leader's id and how long
// after since it became visible.
func (c *testCluster) awaitNewLeader(old string, since time.Time, timeout time.Duration) (string, time.Duration, error) {
	var id string
	ok, detail := pollUntil(timeout, 10*time.Millisecond, func() (bool, string) {
		var seen []string
		for _, n := range c.running() {
			if n.id == old {
				continue
			}
			v, err := n.clusterView()
			if err != nil {
				seen = append(seen, fmt.Sprintf("%s: %v", n.id, err))
				continue
			}
			seen = append(seen, n.id+"→"+v.Leader.ID)
			if v.Leader.ID != "" && v.Leader.ID != old {
				id = v.Leader.ID
				return true, ""
			}
		}
		return false, strings.Join(seen, " ")
	})
	took := time.Since(since)
	if !ok {
		return "", took, fmt.Errorf("no node showed a leader other than %s within %v: %s", old, timeout, detail)
	}
	return id, took, nil
}

// waitVoters waits until the leader's cluster view lists exactly the given
// nodes, each a live voter with the node's own raft, http and grpc address.
func (c *testCluster) waitVoters(l *node, timeout time.Duration, want ...*node) error {
	ok, detail := pollUntil(timeout, 50*time.Millisecond, func() (bool, string) {
		v, err := l.clusterView()
		if err != nil {
			return false, err.Error()
		}
		if len(v.Nodes) != len(want) {
			return false, fmt.Sprintf("%d nodes in the view: %+v", len(v.Nodes), v.Nodes)
		}
		for _, n := range want {
			found := false
			for _, nv := range v.Nodes {
				if nv.ID != n.id {
					continue
				}
				found = true
				if !nv.Voter || !nv.Alive || nv.RaftAddr != n.raftAddr || nv.HTTPAddr != n.httpAddr || nv.GRPCAddr != n.grpcAddr {
					return false, fmt.Sprintf("%s in the view: %+v", n.id, nv)
				}
			}
			if !found {
				return false, fmt.Sprintf("%s not in the view: %+v", n.id, v.Nodes)
			}
		}
		return true, ""
	})
	if !ok {
		return fmt.Errorf("the leader %s's view did not show %d live voters within %v: %s", l.id, len(want), timeout, detail)
	}
	return nil
}

// restart starts n again on its data dir and addresses (no new ports: the
// others know it by them) and waits for /health.
func (c *testCluster) restart(n *node) {
	c.t.Helper()
	if !n.exited() {
		c.t.Fatalf("restart: node %s still running", n.id)
	}
	n.launch()
	if err := n.healthy(30 * time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// waitRejoined waits until the restarted node n is a follower of the
// current leader, the leader lists it as a live voter at its old addresses
// (same id, no new member), and n has applied at least what the leader had
// committed when the wait began. It returns how long that took.
func (c *testCluster) waitRejoined(n *node, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	l := c.leader(timeout)
	if l == n {
		c.t.Fatalf("the restarted node %s leads; want it back as a follower", n.id)
	}
	lv, err := l.clusterView()
	if err != nil {
		c.t.Fatal(err)
	}
	target := lv.CommitIndex
	ok, detail := pollUntil(timeout, 50*time.Millisecond, func() (bool, string) {
		h, err := n.health()
		if err != nil {
			return false, err.Error()
		}
		if h.NodeID != n.id || h.Raft.Role != "follower" || h.Raft.LeaderID != l.id || h.Raft.Applied < target {
			return false, fmt.Sprintf("%s /health: nodeId %q role %q leaderId %q applied %d (want ≥ %d)",
				n.id, h.NodeID, h.Raft.Role, h.Raft.LeaderID, h.Raft.Applied, target)
		}
		return true, ""
	})
	if !ok {
		c.t.Fatalf("node %s did not rejoin within %v: %s", n.id, timeout, detail)
	}
	if err := c.waitVoters(l, timeout, c.nodes...); err != nil {
		c.t.Fatal(err)
	}
	return time.Since(start)
}

// logSize is the current size of n's log (an offset for logSince).
func (n *node) logSize() int64 {
	fi, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ---------------------------------------------------------------------------
// Requests that never fail the test (for worker goroutines and retries).

// send runs one request with headers; body is sent as is when []byte,
// marshalled otherwise.
func (n *node) send(timeout time.Duration, method, path string, body any, hdr map[string]string) (*response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.url(path), rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// errCode is the "code" of an error body ("" if none).
func errCode(r *response) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Code
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
		c.t.Fatalf("%s %s on %s: no answer but 5xx/transport errors for %v: %s", method, path, n.id, timeout, detail)
	}
	return r
}
