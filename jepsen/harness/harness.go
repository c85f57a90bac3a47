// Package harness runs a cluster of real queen-node processes for the fault
// tests: in network namespaces when the machine allows it (so partitions
// are real), or on loopback addresses otherwise. It kills (SIGKILL),
// pauses (SIGSTOP/SIGCONT), restarts and reconfigures them, and checks the
// cluster's health.
//
// With Options.LossyFS each node's data dir is a lossyfs mount of its own
// (jepsen/lossyfs): writes a node did not fsync live in the harness's
// memory, and PowerLoss/PowerOff throw them away as a power cut would,
// then restart the node with a new QUEEN_TEST_BOOT_ID so that it knows the
// machine went down (see store/session.go).
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/jepsen/netns"
)

// Options configure a cluster.
type Options struct {
	Nodes  int
	Bin    string // the queen-node binary
	Dir    string // data dirs and logs go here
	NetNS  bool   // one namespace per node (partitions possible)
	Extra  []string
	Logf   func(format string, args ...any)
	Expect int // --bootstrap-expect; 0 = Nodes
	// LossyFS puts each node's data dir on its own lossyfs mount (the
	// backing "disk" is Dir/nX.disk), which makes PowerOff/PowerLoss
	// possible. It needs root and FUSE (lossyfs.Available).
	LossyFS bool
}

// Node is one process.
type Node struct {
	ID      string
	Index   int // 1-based
	host    string
	ports   [4]int // http, grpc, raft, gossip
	Dir     string
	LogPath string
	// Backing is the lossyfs disk behind Dir ("" without LossyFS).
	Backing string

	disk   *lossyfs.FS
	bootID string // QUEEN_TEST_BOOT_ID the node starts with ("" = none)
	boots  int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	paused  bool
	removed bool
}

// URL is the node's HTTP API base URL.
func (n *Node) URL() string {
	return fmt.Sprintf("http://%s", net.JoinHostPort(n.host, fmt.Sprint(n.ports[0])))
}

func (n *Node) addr(i int) string { return net.JoinHostPort(n.host, fmt.Sprint(n.ports[i])) }

// Running reports whether the process is alive (paused counts as alive).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Paused reports whether the node is stopped with SIGSTOP.
func (n *Node) Paused() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.paused }

// Cluster is the running processes.
type Cluster struct {
	opts  Options
	run   string // a token naming this cluster's simulated boots
	net   *netns.Net
	mu    sync.Mutex
	nodes []*Node
	http  *http.Client
}

// Start starts opts.Nodes nodes and waits until they elect a leader.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Expect == 0 {
		opts.Expect = opts.Nodes
	}
	c := &Cluster{opts: opts, http: &http.Client{Timeout: 3 * time.Second}, run: fmt.Sprintf("%06x", rand.Intn(1<<24))}
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
	for i := 1; i <= opts.Nodes; i++ {
		n, err := c.newNode(i)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		if err := c.mountDisk(n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.launch(n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if _, err := c.WaitLeader(ctx, 30*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// LossyFS reports whether the data dirs are on lossyfs (power loss possible).
func (c *Cluster) LossyFS() bool { return c.opts.LossyFS }

// NetNS reports whether the nodes run in namespaces (partitions possible).
func (c *Cluster) NetNS() bool { return c.net != nil }

// Net is the namespace network, or nil.
func (c *Cluster) Net() *netns.Net { return c.net }

func (c *Cluster) newNode(i int) (*Node, error) {
	n := &Node{ID: fmt.Sprintf("n%d", i), Index: i, Dir: filepath.Join(c.opts.Dir, fmt.Sprintf("n%d", i))}
	n.LogPath = filepath.Join(c.opts.Dir, fmt.Sprintf("n%d.log", i))
	if c.net != nil {
		n.host = c.net.IP(i)
		n.ports = [4]int{6632, 6633, 6634, 6635}
		return n, nil
	}
	n.host = "127.0.0.1"
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	copy(n.ports[:], ports)
	return n, nil
}

func freePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < k; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func (c *Cluster) joinList() string {
	var s string
	for _, n := range c.nodes {
		if n.removed {
			continue
		}
		if s != "" {
			s += ","
		}
		s += n.addr(3)
	}
	return s
}

// launch starts (or restarts) n's process on its data dir.
func (c *Cluster) launch(n *Node) error {
	if c.opts.LossyFS && n.disk == nil {
		// Never start a node on the bare mountpoint: its data is on the
		// lossyfs disk.
		if err := c.mountDisk(n); err != nil {
			return err
		}
	}
	args := []string{"--node-id", n.ID, "--data-dir", n.Dir,
		"--http-addr", n.addr(0), "--grpc-addr", n.addr(1), "--raft-addr", n.addr(2), "--gossip-addr", n.addr(3),
		"--join", c.joinList(), "--bootstrap-expect", fmt.Sprint(c.opts.Expect), "--test-hooks=true",
		"--log-level", "info"}
	args = append(args, c.opts.Extra...)
	var cmd *exec.Cmd
	if c.net != nil {
		cmd = c.net.Command(n.Index, c.opts.Bin, args...)
	} else {
		cmd = exec.Command(c.opts.Bin, args...)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if n.bootID != "" {
		// With --test-hooks this replaces the kernel's boot id: a new value
		// tells the node that the machine rebooted (a power loss).
		cmd.Env = append(os.Environ(), "QUEEN_TEST_BOOT_ID="+n.bootID)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("harness: start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()
	c.opts.Logf("started %s (pid %d)", n.ID, cmd.Process.Pid)
	return nil
}

// Nodes lists the nodes (running or not), excluding removed ones.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if !n.removed {
			out = append(out, n)
		}
	}
	return out
}

// URLs are the HTTP base URLs of the nodes.
func (c *Cluster) URLs() []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.URL())
	}
	return out
}

// Kill sends SIGKILL and waits for the process to go.
func (c *Cluster) Kill(n *Node) {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	<-exited
	n.mu.Lock()
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	c.opts.Logf("killed %s", n.ID)
}

// Terminate sends SIGTERM and waits (up to 30 s, then SIGKILL).
func (c *Cluster) Terminate(n *Node) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	if n.Paused() {
		c.Resume(n)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	n.mu.Lock()
	n.cmd = nil
	n.mu.Unlock()
}

// Pause stops the process with SIGSTOP.
func (c *Cluster) Pause(n *Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.paused {
		n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
		c.opts.Logf("paused %s", n.ID)
	}
}

// Resume continues a paused process.
func (c *Cluster) Resume(n *Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
		c.opts.Logf("resumed %s", n.ID)
	}
}

// Restart starts a stopped node again on its data dir.
func (c *Cluster) Restart(n *Node) error {
	if n.Running() {
		return nil
	}
	return c.launch(n)
}

// Stop kills every process, unmounts the lossyfs disks (a clean shutdown:
// what the nodes left unsynced is written back, as the page cache would
// be) and tears the network down.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		c.Kill(n)
	}
	for _, n := range c.nodes {
		if n.disk != nil {
			if err := n.disk.Unmount(); err != nil {
				c.opts.Logf("%s: %v", n.ID, err)
			}
			n.disk = nil
		}
	}
	if c.net != nil {
		c.net.Close()
	}
}

// View is GET /api/v1/system/cluster.
type View struct {
	Leader struct {
		ID string `json:"id"`
	} `json:"leader"`
	Nodes []struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
		Alive bool   `json:"alive"`
	} `json:"nodes"`
	Term uint64 `json:"term"`
}

func (c *Cluster) view(ctx context.Context, n *Node) (*View, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL()+"/api/v1/system/cluster", nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Leader asks the running, unpaused nodes who leads; it returns the leader
// only if every asked node that answers agrees.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	var leader string
	for _, n := range c.Nodes() {
		if !n.Running() || n.Paused() {
			continue
		}
		v, err := c.view(ctx, n)
		if err != nil {
			continue
		}
		if v.Leader.ID == "" {
			return nil, errors.New("no leader")
		}
		if leader != "" && leader != v.Leader.ID {
			return nil, fmt.Errorf("nodes disagree: %s vs %s", leader, v.Leader.ID)
		}
		leader = v.Leader.ID
	}
	for _, n := range c.Nodes() {
		if n.ID == leader {
			return n, nil
		}
	}
	return nil, errors.New("no leader")
}

// WaitLeader polls until Leader answers.
func (c *Cluster) WaitLeader(ctx context.Context, within time.Duration) (*Node, error) {
	deadline := time.Now().Add(within)
	for {
		n, err := c.Leader(ctx)
		if err == nil {
			return n, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("harness: no leader after %v: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Healthy waits until every node that should run is running, answers
// /health with 200, and all agree on one leader.
func (c *Cluster) Healthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := c.healthOnce(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: unhealthy after %v: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthOnce(ctx context.Context) error {
	for _, n := range c.Nodes() {
		if !n.Running() {
			return fmt.Errorf("%s is down", n.ID)
		}
		if n.Paused() {
			return fmt.Errorf("%s is paused", n.ID)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", n.URL()+"/health", nil)
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: /health %d", n.ID, resp.StatusCode)
		}
	}
	_, err := c.Leader(ctx)
	return err
}

// Post sends a JSON body to a node (test hooks, operator calls).
func (c *Cluster) Post(ctx context.Context, n *Node, method, path string, body []byte) (int, error) {
	var rd *bytesReader
	if body != nil {
		rd = &bytesReader{b: body}
	}
	req, _ := http.NewRequestWithContext(ctx, method, n.URL()+path, rd.reader())
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
