package cluster_test

// In-process multi-node tests: real Raft over loopback TCP, real bbolt
// files, real gossip, real gRPC forwarding. They poll with checkFor instead
// of sleeping.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/grpcapi"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/raftlog"
)

type testNode struct {
	id      string
	dir     string
	raft    string
	gossip  string
	grpc    string
	join    []string
	expect  int
	tuning  raftlog.Tuning
	node    *cluster.Node
	srv     *grpc.Server
	fwd     *grpcapi.ForwardClient
	snapMax int64
}

// freeAddrs returns n distinct free loopback addresses, below the
// kernel's ephemeral range (nodeproc.FreeAddrs): a node stopped and started
// again finds its ports free, never taken by a client connection meanwhile.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	sets, err := nodeproc.FreeAddrs((n+3)/4, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range sets {
		out = append(out, a.HTTP, a.GRPC, a.Raft, a.Gossip)
	}
	return out[:n]
}

func newTestNode(t *testing.T, id string, expect int, a []string) *testNode {
	if a == nil {
		a = freeAddrs(t, 3)
	}
	return &testNode{id: id, dir: t.TempDir(), raft: a[0], gossip: a[1], grpc: a[2], expect: expect, tuning: fast()}
}

func fast() raftlog.Tuning {
	return raftlog.Tuning{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond}
}

func (tn *testNode) start(t *testing.T) {
	t.Helper()
	n, err := cluster.Start(cluster.Config{
		NodeID: tn.id, DataDir: tn.dir, RaftAddr: tn.raft, BootstrapExpect: tn.expect,
		GossipAddr: tn.gossip, Join: tn.join, LocalGossip: true, GRPCAdvertise: tn.grpc,
		HTTPAdvertise: "http://" + tn.id, Tuning: tn.tuning, SweepInterval: 100 * time.Millisecond,
		SnapshotBytes: tn.snapMax,
	})
	if err != nil {
		t.Fatalf("start %s: %v", tn.id, err)
	}
	tn.node = n
	tn.fwd = grpcapi.NewForwardClient(nil)
	n.SetForwarder(tn.fwd)
	ln, err := net.Listen("tcp", tn.grpc)
	if err != nil {
		t.Fatalf("listen %s: %v", tn.grpc, err)
	}
	tn.srv = grpcapi.NewServer(n)
	go tn.srv.Serve(ln)
}

func (tn *testNode) stop(crash bool) {
	if tn.node == nil {
		return
	}
	tn.srv.Stop()
	if crash {
		tn.node.Kill()
	} else {
		tn.node.Shutdown()
	}
	tn.fwd.Close()
	tn.node = nil
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
}

func newCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	var gossip []string
	addrs := freeAddrs(t, 3*n) // all at once: no port handed out twice
	for i := 0; i < n; i++ {
		tn := newTestNode(t, fmt.Sprintf("n%d", i+1), n, addrs[3*i:3*i+3])
		gossip = append(gossip, tn.gossip)
		c.nodes = append(c.nodes, tn)
	}
	for _, tn := range c.nodes {
		tn.join = gossip
		tn.start(t)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.stop(false)
		}
	})
	c.leader()
	return c
}

func checkFor(t *testing.T, total time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", total, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leader waits for exactly one leader among the running nodes.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var lead *testNode
	checkFor(c.t, 15*time.Second, func() error {
		lead = nil
		for _, tn := range c.nodes {
			if tn.node == nil || !tn.node.IsLeader() {
				continue
			}
			if lead != nil {
				return errors.New("two leaders")
			}
			lead = tn
		}
		if lead == nil {
			return errors.New("no leader yet")
		}
		return nil
	})
	return lead
}

func (c *testCluster) followers() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.node != nil && !tn.node.IsLeader() {
			out = append(out, tn)
		}
	}
	return out
}

func push(ctx context.Context, n *cluster.Node, queue, txn string) (*command.PushItemResult, error) {
	id := uuid.Must(uuid.NewV7())
	res, err := n.Apply(ctx, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{{
		Queue: queue, Partition: "Default", TransactionId: txn, Payload: []byte(`"` + txn + `"`), MessageId: id[:]}}}}})
	if err != nil {
		return nil, err
	}
	return res.(*command.PushResult).Items[0], nil
}

// drain pops everything a fresh group sees, through node n, and returns the
// transactionIds.
func drain(t *testing.T, n *cluster.Node, queue string) map[string]int {
	t.Helper()
	got := map[string]int{}
	group := "drain-" + uuid.NewString()
	for i := 0; i < 1000; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := n.Pop(ctx, &command.Pop{Queue: queue, ConsumerGroup: group, Batch: 500, Partitions: 10}, 0)
		cancel()
		if err != nil {
			t.Fatalf("drain pop: %v", err)
		}
		if len(res.Messages) == 0 {
			return got
		}
		var acks []*command.AckItem
		for j, m := range res.Messages {
			got[res.Records[j].TransactionId]++
			acks = append(acks, &command.AckItem{TransactionId: res.Records[j].TransactionId, PartitionId: m.PartitionId,
				ConsumerGroup: group, LeaseId: res.LeaseId, Status: command.AckStatus_COMPLETED})
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		_, err = n.Apply(ctx, &command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: acks}}})
		cancel()
		if err != nil {
			t.Fatalf("drain ack: %v", err)
		}
	}
	t.Fatal("drain did not finish")
	return nil
}

func TestThreeNodesElectForwardAndReadFromFollowers(t *testing.T) {
	c := newCluster(t, 3)
	f := c.followers()[0]
	ctx := context.Background()
	// Every node names the leader's client addresses (GET /health's
	// leaderHttp and leaderGrpc, the Leader RPC), as gossip carries them.
	lead := c.leader()
	checkFor(t, 10*time.Second, func() error {
		for _, tn := range c.nodes {
			st := tn.node.Status()
			if st.LeaderHTTP != "http://"+lead.id || st.LeaderGRPC != lead.grpc {
				return fmt.Errorf("%s names the leader at %q and %q, want %q and %q", tn.id, st.LeaderHTTP, st.LeaderGRPC, "http://"+lead.id, lead.grpc)
			}
		}
		return nil
	})
	r, err := push(ctx, f.node, "q", "via-follower")
	if err != nil || r.Status != command.PushItemResult_QUEUED {
		t.Fatalf("push through a follower: %v %v", r, err)
	}
	// A linearizable read on another follower sees it at once.
	other := c.followers()[1]
	err = other.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		if q := rd.Queue("q"); q == nil {
			return errors.New("a linearizable read on a follower missed an acknowledged push")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A linearizable query on a follower is answered by the leader: a KV
	// write acknowledged through one follower is there for the other at
	// once, and the follower asked no read index for it.
	if _, err := other.node.Apply(ctx, &command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: []*command.KVOp{
		{Kind: command.KVOp_PUT, Ns: "ns", Key: "k", Value: []byte(`"v1"`)}}}}}); err != nil {
		t.Fatal(err)
	}
	counted := &countingForwarder{Forwarder: f.fwd}
	f.node.SetForwarder(counted)
	res, err := f.node.Query(ctx, cluster.Linearizable, &command.Query{Body: &command.Query_Kv{Kv: &command.KVReads{
		Ops: []*command.KVOp{{Kind: command.KVOp_GET, Ns: "ns", Key: "k"}}}}})
	if err != nil || len(res.GetKv().GetResults()) != 1 || string(res.GetKv().Results[0].Value) != `"v1"` {
		t.Fatalf("linearizable KV get through a follower: %v %v", res, err)
	}
	if counted.queries.Load() != 1 || counted.readIndexes.Load() != 0 {
		t.Fatalf("the follower forwarded %d queries and asked %d read indexes; want 1 and 0",
			counted.queries.Load(), counted.readIndexes.Load())
	}
	f.node.SetForwarder(f.fwd)
	// A long-poll pop on a follower is served by the leader, parks there, and
	// is woken by a push: long before its 20 s wait is up.
	const wait = 20 * time.Second
	type popped struct {
		res *command.PopResult
		err error
	}
	done := make(chan popped, 1)
	go func() {
		res, err := other.node.Pop(ctx, &command.Pop{Queue: "lp", Batch: 1}, wait)
		done <- popped{res, err}
	}()
	lead = c.leader()
	checkFor(t, 10*time.Second, func() error {
		if n := lead.node.ParkedPops(); n != 1 {
			return fmt.Errorf("%d pops parked on the leader, want the follower's one", n)
		}
		return nil
	})
	if _, err := push(ctx, f.node, "lp", "wake"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-done:
		if p.err != nil || len(p.res.Messages) != 1 || p.res.Records[0].TransactionId != "wake" {
			t.Fatalf("long poll through a follower: %v %v", p.res, p.err)
		}
	case <-time.After(wait / 2):
		t.Fatalf("a long poll through a follower, parked on the leader for %v, was not woken by a push within %v", wait, wait/2)
	}
	view := f.node.Cluster()
	if len(view.Nodes) != 3 || view.Leader.ID == "" {
		t.Fatalf("cluster view: %+v", view)
	}
	for _, nv := range view.Nodes {
		if !nv.Voter || !nv.Alive {
			t.Fatalf("node %+v should be a live voter", nv)
		}
	}
}

// countingForwarder counts what a node hands to the leader.
type countingForwarder struct {
	cluster.Forwarder
	queries, readIndexes atomic.Int64
}

func (c *countingForwarder) Query(ctx context.Context, addr string, q *command.Query) (*command.QueryResult, error) {
	c.queries.Add(1)
	return c.Forwarder.Query(ctx, addr, q)
}

func (c *countingForwarder) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	c.readIndexes.Add(1)
	return c.Forwarder.ReadIndex(ctx, addr)
}

func TestKillLeaderKeepsEveryAcknowledgedPush(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	ctx := context.Background()
	acked := map[string]bool{}
	for i := 0; i < 50; i++ {
		id := fmt.Sprint("before-", i)
		if _, err := push(ctx, c.followers()[i%2].node, "q", id); err != nil {
			t.Fatal(err)
		}
		acked[id] = true
	}
	start := time.Now()
	old.stop(true)
	newLeader := c.leader()
	if newLeader == old {
		t.Fatal("the dead node still leads")
	}
	t.Logf("new leader %s after %v", newLeader.id, time.Since(start))
	for i := 0; i < 50; i++ {
		id := fmt.Sprint("after-", i)
		if _, err := push(ctx, c.followers()[0].node, "q", id); err != nil {
			t.Fatal(err)
		}
		acked[id] = true
	}
	got := drain(t, newLeader.node, "q")
	for id := range acked {
		if got[id] != 1 {
			t.Fatalf("acknowledged push %s read back %d times", id, got[id])
		}
	}
	// The old leader comes back as a follower with everything.
	old.start(t)
	checkFor(t, 10*time.Second, func() error {
		return old.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
			for _, p := range rd.Partitions("q") {
				if p.Count == 100 {
					return nil
				}
			}
			return errors.New("restarted node has not caught up")
		})
	})
	if old.node.IsLeader() && c.leader() != old {
		t.Fatal("confused leadership")
	}
}

// A leader that stops gracefully hands leadership over (Drain): it tells a
// follower to stand at once (TimeoutNow), and steps down when that follower
// asks for votes in the next term, all while its own Raft still runs. A plain
// election after a silent stop could meet any time limit this test might set,
// so it checks what only a transfer does: the stopping leader itself saw the
// later term before its Raft shut down. Without the transfer it leads to the
// end and stops in the term it led in, since the followers only stand once
// its heartbeats have stopped. (Its role after the stop is raft's last
// setState: a message from the new leader racing the shutdown can leave
// "follower" there, so the test asks only that it no longer leads.)
func TestGracefulShutdownTransfersLeadership(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	oldNode, led := old.node, old.node.Status().Term
	old.stop(false)
	if st := oldNode.Status(); st.Role == "leader" || st.Term <= led {
		t.Fatalf("the leader of term %d stopped as %s in term %d: it did not hand leadership over before stopping",
			led, st.Role, st.Term)
	}
	next := c.leader()
	if next == old {
		t.Fatal("the stopped node still leads")
	}
	t.Logf("leadership moved from %s (term %d) to %s (term %d)", old.id, led, next.id, next.node.Status().Term)
}

func TestFourthNodeJoinsWithTheSameCommandLine(t *testing.T) {
	c := newCluster(t, 3)
	n4 := newTestNode(t, "n4", 3, nil)
	n4.join = c.nodes[0].join
	c.nodes = append(c.nodes, n4)
	n4.start(t)
	checkFor(t, 15*time.Second, func() error {
		voters := 0
		for _, nv := range c.leader().node.Cluster().Nodes {
			if nv.Voter {
				voters++
			}
		}
		if voters != 4 {
			return fmt.Errorf("%d voters", voters)
		}
		return nil
	})
	if _, err := push(context.Background(), n4.node, "q", "from-n4"); err != nil {
		t.Fatal(err)
	}
	// An operator removes a node that is gone for good.
	n4.stop(true)
	if err := c.nodes[0].node.RemoveServer(context.Background(), "n4", "ops"); err != nil {
		t.Fatal(err)
	}
	for _, nv := range c.leader().node.Cluster().Nodes {
		if nv.ID == "n4" && nv.Voter {
			t.Fatal("n4 is still a voter")
		}
	}
	if err := c.nodes[0].node.RemoveServer(context.Background(), "nope", "ops"); !errors.Is(err, cluster.ErrUnknownServer) {
		t.Fatalf("removing an unknown node: %v", err)
	}
}

func TestLaggingFollowerCatchesUpThroughInstallSnapshot(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	lag := c.followers()[0]
	lag.stop(false)
	lead := c.leader()
	for i := 0; i < 300; i++ {
		if _, err := push(ctx, lead.node, "q", fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Snapshot and truncate the leader's log past the lagging node: trailing
	// logs are 10240 by default, so take snapshots with a tiny trailing log.
	for _, tn := range c.nodes {
		if tn.node != nil {
			if err := tn.node.SnapshotWithTrailing(10); err != nil {
				t.Fatal(err)
			}
		}
	}
	if snaps, _ := filepath.Glob(filepath.Join(lag.dir, "raft", "snapshots", "*")); len(snaps) != 0 {
		t.Fatalf("the stopped node already has snapshots: %v", snaps)
	}
	lag.start(t)
	checkFor(t, 20*time.Second, func() error {
		return lag.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
			for _, p := range rd.Partitions("q") {
				if p.Count == 300 {
					return nil
				}
			}
			return errors.New("not caught up")
		})
	})
	snaps, _ := filepath.Glob(filepath.Join(lag.dir, "raft", "snapshots", "*"))
	if len(snaps) == 0 {
		t.Fatal("caught up without installing a snapshot")
	}
	got := drain(t, lag.node, "q")
	if len(got) != 300 {
		t.Fatalf("after InstallSnapshot the node reads %d messages, want 300", len(got))
	}
}
