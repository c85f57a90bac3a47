package nodeproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// bin is the queen-node binary TestMain builds.
var bin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nodeproc-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin, err = Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func mustStartNode(t *testing.T, s Spec) *Node {
	t.Helper()
	n, err := NewNode(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("log of %s:\n%s", n.ID(), n.Tail(40))
		}
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFreeAddrsDistinct(t *testing.T) {
	avoid := map[string]bool{}
	first, err := FreeAddrs(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range first {
		for _, p := range a.list() {
			avoid[p] = true
		}
	}
	more, err := FreeAddrs(3, avoid)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range append(first, more...) {
		for _, p := range a.list() {
			if seen[p] {
				t.Fatalf("address %s handed out twice", p)
			}
			seen[p] = true
		}
	}
	if got := AddrsAt("10.1.2.3", 6632); got.HTTP != "10.1.2.3:6632" || got.Gossip != "10.1.2.3:6635" {
		t.Errorf("AddrsAt: %+v", got)
	}
}

// TestNodeLifecycle: start, pause and resume, kill -9, restart on the same
// data dir and ports, SIGTERM.
func TestNodeLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := mustStartNode(t, Spec{Bin: bin, ID: "solo", DataDir: filepath.Join(dir, "data"), Flags: []string{"--log-level", "warn"}})
	addrs, pid := n.Addrs(), n.PID()
	if pid <= 0 || !n.Running() || n.Exited() {
		t.Fatalf("after Start: pid %d running %v exited %v", pid, n.Running(), n.Exited())
	}
	if h, err := n.Health(ctx); err != nil || h.NodeID != "solo" || h.Raft.Role != "leader" {
		t.Fatalf("health %+v, %v", h, err)
	}

	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := n.Health(pctx); err == nil {
		t.Errorf("a paused node answered /health")
	}
	cancel()
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitHealthy(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() || !n.Exited() || n.Crashed() || n.PID() != 0 {
		t.Fatalf("after Kill: running %v exited %v crashed %v pid %d", n.Running(), n.Exited(), n.Crashed(), n.PID())
	}
	off := n.LogSize()
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Addrs() != addrs || n.PID() == pid {
		t.Errorf("restart: addrs %+v (were %+v), pid %d (was %d)", n.Addrs(), addrs, n.PID(), pid)
	}
	if got := n.LogSince(off); len(got) == 0 {
		t.Errorf("no log after the restart")
	}
	if err := n.Restart(ctx); err == nil {
		t.Errorf("Restart of a running node did not fail")
	}

	code, took, err := n.Terminate(10 * time.Second)
	if err != nil || code != 0 || took > 5*time.Second {
		t.Errorf("Terminate: code %d after %v, %v", code, took, err)
	}
	if n.Crashed() {
		t.Errorf("a terminated node counts as crashed")
	}
}

// TestStartRetriesLostPortRace: a port taken between choosing it and the
// node's bind makes Start pick new ports.
func TestStartRetriesLostPortRace(t *testing.T) {
	n, err := NewNode(Spec{Bin: bin, ID: "race", DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	taken := n.Addrs().HTTP
	l, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, n.Tail(20))
	}
	if n.Addrs().HTTP == taken {
		t.Fatalf("started on the taken address %s", taken)
	}
}

// TestClusterFailoverAndMembership: three nodes, kill -9 of the leader, a
// new leader, the old one back as a voter; a fourth node added and removed.
func TestClusterFailoverAndMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	ctx := context.Background()
	c, err := StartCluster(ctx, ClusterConfig{Bin: bin, Dir: t.TempDir(), Nodes: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	nl, err := c.AwaitNewLeader(ctx, old.ID(), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if nl == old || len(c.Running()) != 2 {
		t.Fatalf("new leader %s, %d running", nl.ID(), len(c.Running()))
	}
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitVoters(ctx, 30*time.Second, c.Nodes()...); err != nil {
		t.Fatal(err)
	}

	n4, err := c.AddNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n4.ID() != "n4" || len(c.Nodes()) != 4 {
		t.Fatalf("added %s; %d nodes", n4.ID(), len(c.Nodes()))
	}
	if err := c.RemoveNode(ctx, n4); err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes()) != 3 || n4.Running() {
		t.Fatalf("after removing n4: %d nodes, n4 running %v", len(c.Nodes()), n4.Running())
	}
	if err := c.Healthy(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		if n.Running() || n.Crashed() {
			t.Errorf("%s after Stop: running %v crashed %v", n.ID(), n.Running(), n.Crashed())
		}
	}
}
