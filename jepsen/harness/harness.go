// Package harness runs a cluster of real queen-node processes for the fault
// tests, on nodeproc: in network namespaces when the machine allows it (so
// partitions are real), or on loopback addresses otherwise. The processes
// are nodeproc's (kill -9, SIGSTOP/SIGCONT, SIGTERM, restarts, membership,
// health checks); what is the fault tests' own is here: the namespaces
// (jepsen/netns) and the disks that lose power (jepsen/lossyfs).
//
// With Options.LossyFS each node's data dir is a lossyfs mount of its own
// (jepsen/lossyfs): writes a node did not fsync live in the harness's
// memory, and PowerLoss/PowerOff throw them away as a power cut would,
// then restart the node with a new QUEEN_TEST_BOOT_ID so that it knows the
// machine went down (see store/session.go).
package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/jepsen/netns"
	"github.com/queen-node/queen-node/nodeproc"
)

// Options configure a cluster.
type Options struct {
	Nodes int
	Bin   string // the queen-node binary
	Dir   string // data dirs and logs go here
	NetNS bool   // one namespace per node (partitions possible)
	Extra []string
	Logf  func(format string, args ...any)
	// LossyFS puts each node's data dir on its own lossyfs mount (the
	// backing "disk" is Dir/nX.disk), which makes PowerOff/PowerLoss
	// possible. It needs root and FUSE (lossyfs.Available).
	LossyFS bool
}

// Node is one node: its process (nodeproc) and, with LossyFS, its disk.
type Node struct {
	*nodeproc.Node
	Index int // 1-based; also its namespace's number
	// Backing is the lossyfs disk behind the data dir ("" without LossyFS).
	Backing string

	id, dir string // the node's id and data dir, for the disk
	disk    *lossyfs.FS
	bootID  string // QUEEN_TEST_BOOT_ID the node starts with ("" = none)
	boots   int
}

// Cluster is the running processes.
type Cluster struct {
	opts Options
	run  string // a token naming this cluster's simulated boots
	net  *netns.Net
	pc   *nodeproc.Cluster

	mu    sync.Mutex
	nodes map[string]*Node // every node made, by id
}

// Start starts opts.Nodes nodes and waits until they formed a cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := &Cluster{opts: opts, run: fmt.Sprintf("%06x", rand.Intn(1<<24)), nodes: map[string]*Node{}}
	if opts.LossyFS {
		if ok, why := lossyfs.Available(); !ok {
			return nil, fmt.Errorf("harness: lossyfs: %s", why)
		}
	}
	if opts.NetNS {
		nt, err := netns.New(opts.Nodes)
		if err != nil {
			return nil, fmt.Errorf("harness: network namespaces: %w", err)
		}
		c.net = nt
	}
	pc, err := nodeproc.StartCluster(ctx, nodeproc.ClusterConfig{
		Bin: opts.Bin, Dir: opts.Dir, Nodes: opts.Nodes, Node: c.spec, Logf: opts.Logf,
		Flags: append([]string{"--test-hooks=true", "--log-level", "info"}, opts.Extra...),
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("harness: %w", err)
	}
	c.pc = pc
	for _, pn := range pc.Nodes() {
		c.link(pn)
	}
	return c, nil
}

// spec makes node i: in its namespace (its address, `ip netns exec`) with
// NetNS, its data dir on its own lossyfs disk with LossyFS.
func (c *Cluster) spec(i int, s *nodeproc.Spec) error {
	n := &Node{Index: i, id: s.ID, dir: s.DataDir}
	// Every node serves Kafka too, for the kafka workload's clients.
	s.Kafka = true
	if c.net != nil {
		s.Addrs = nodeproc.AddrsAt(c.net.IP(i), 6632)
		s.Wrapper = []string{"ip", "netns", "exec", c.net.NS(i)}
	}
	s.Prepare = func(*nodeproc.Node) ([]string, error) {
		if !c.opts.LossyFS {
			return nil, nil
		}
		// Never start a node on the bare mountpoint: its data is on the
		// lossyfs disk.
		if n.disk == nil {
			if err := c.mountDisk(n); err != nil {
				return nil, err
			}
		}
		// With --test-hooks this replaces the kernel's boot id: a new value
		// tells the node that the machine rebooted (a power loss).
		return []string{"QUEEN_TEST_BOOT_ID=" + n.bootID}, nil
	}
	c.mu.Lock()
	c.nodes[s.ID] = n
	c.mu.Unlock()
	return nil
}

// link ties the harness node of pn's id to pn.
func (c *Cluster) link(pn *nodeproc.Node) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[pn.ID()]
	n.Node = pn
	return n
}

func (c *Cluster) node(pn *nodeproc.Node) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[pn.ID()]
}

// Procs is the node processes, for what nodeproc's cluster helpers do
// (leaders, voters) beside the faults.
func (c *Cluster) Procs() *nodeproc.Cluster { return c.pc }

// ByID is the node of that id, or nil.
func (c *Cluster) ByID(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// Size is the number of nodes the cluster started with.
func (c *Cluster) Size() int { return c.opts.Nodes }

// LossyFS reports whether the data dirs are on lossyfs (power loss possible).
func (c *Cluster) LossyFS() bool { return c.opts.LossyFS }

// NetNS reports whether the nodes run in namespaces (partitions possible).
func (c *Cluster) NetNS() bool { return c.net != nil }

// Net is the namespace network, or nil.
func (c *Cluster) Net() *netns.Net { return c.net }

// Nodes lists the nodes (running or not), excluding removed ones.
func (c *Cluster) Nodes() []*Node {
	var out []*Node
	for _, pn := range c.pc.Nodes() {
		out = append(out, c.node(pn))
	}
	return out
}

// URLs are the HTTP base URLs of the nodes.
func (c *Cluster) URLs() []string { return c.pc.URLs() }

// KafkaAddrs are the Kafka listener addresses of the nodes (seed brokers).
func (c *Cluster) KafkaAddrs() []string {
	var out []string
	for _, pn := range c.pc.Nodes() {
		out = append(out, pn.Addrs().Kafka)
	}
	return out
}

// Leader is the node every running, unpaused node names as the leader.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	pn, err := c.pc.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return c.node(pn), nil
}

// Healthy waits until every node that should run is running, answers
// /health with 200, and all agree on one leader.
func (c *Cluster) Healthy(ctx context.Context, within time.Duration) error {
	return c.pc.Healthy(ctx, within)
}

// Restart starts a stopped node again on its data dir (its disk mounted
// first). It does not wait for the node to be healthy: after a power loss
// of every node none is until a majority is back.
func (c *Cluster) Restart(n *Node) error {
	if n.Running() {
		return nil
	}
	return n.Launch()
}

// AddNode starts a new node that joins the running cluster (with the same
// --bootstrap-expect; the leader adds it as a voter).
func (c *Cluster) AddNode(ctx context.Context) (*Node, error) {
	if c.net != nil {
		got, err := c.net.AddNode()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		want := len(c.nodes) + 1
		c.mu.Unlock()
		if got != want {
			return nil, fmt.Errorf("harness: namespace %d for node %d", got, want)
		}
	}
	pn, err := c.pc.AddNode(ctx)
	if pn == nil {
		return nil, err
	}
	return c.link(pn), err
}

// RemoveNode stops a node and removes it from the configuration through an
// operator call on another node.
func (c *Cluster) RemoveNode(ctx context.Context, n *Node) error {
	return c.pc.RemoveNode(ctx, n.Node)
}

// Stop kills every process, unmounts the lossyfs disks (a clean shutdown:
// what the nodes left unsynced is written back, as the page cache would
// be) and tears the network down.
func (c *Cluster) Stop() {
	if c.pc != nil {
		if err := c.pc.Stop(); err != nil {
			c.opts.Logf("%v", err)
		}
	}
	c.mu.Lock()
	nodes := c.nodes
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if n.disk != nil {
			errs = append(errs, n.disk.Unmount())
			n.disk = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.opts.Logf("%v", err)
	}
	if c.net != nil {
		c.net.Close()
	}
}
