package nodeproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ClusterConfig configures a cluster. Bin, Dir and Nodes are required.
type ClusterConfig struct {
	Bin   string
	Dir   string // node nK's data dir is Dir/nK and its log Dir/nK.log, unless Node says otherwise
	Nodes int    // the first nodes, n1..nN; also their --bootstrap-expect
	Flags []string
	Env   []string
	// Node, when set, adjusts node i's Spec (1-based) before the node is
	// made, for the first nodes and for AddNode: its addresses, data dir,
	// wrapper command, environment, Prepare hook.
	Node func(i int, s *Spec) error
	// Logf receives cluster and node events; nil = silent.
	Logf func(format string, args ...any)
}

// Cluster is queen-node processes that found each other over gossip: every
// node runs with --join (the gossip addresses of all the cluster's nodes)
// and --bootstrap-expect N. Its methods may be called from several
// goroutines.
type Cluster struct {
	cfg    ClusterConfig
	expect int

	mu      sync.Mutex
	nodes   []*Node // every node made, in order
	removed map[*Node]bool
}

// StartCluster starts cfg.Nodes nodes and waits until they formed one
// cluster: every node answers /health with 200, all name one leader, and
// the leader lists every node as a live voter at its addresses. A start
// that lost a port race is retried on new ports (three attempts). On an
// error every process is stopped and the error ends with each node's log.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Bin == "" || cfg.Dir == "" || cfg.Nodes < 1 {
		return nil, errors.New("nodeproc: a ClusterConfig needs Bin, Dir and Nodes >= 1")
	}
	c := &Cluster{cfg: cfg, expect: cfg.Nodes, removed: map[*Node]bool{}}
	nodes, err := c.makeNodes(1, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	c.nodes = nodes
	for attempt := 1; ; attempt++ {
		err := c.startAll(ctx)
		if err == nil {
			return c, nil
		}
		raced := false
		for _, n := range nodes {
			raced = raced || (n.auto && n.lostBindRace())
		}
		err = c.withLogs(err)
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		if !raced || attempt == 3 {
			return nil, err
		}
		c.logf("cluster start %d lost a port race; retrying on new ports", attempt)
		for _, n := range nodes {
			if n.auto {
				if err := n.newAddrs(); err != nil {
					return nil, err
				}
			}
			if err := clearDir(n.DataDir()); err != nil {
				return nil, err
			}
		}
	}
}

// makeNodes makes nodes first..first+k-1 (no processes), with fresh
// loopback ports for those whose Spec has none.
func (c *Cluster) makeNodes(first, k int) ([]*Node, error) {
	specs := make([]Spec, k)
	var auto []int
	for j := range specs {
		id := fmt.Sprintf("n%d", first+j)
		s := Spec{Bin: c.cfg.Bin, ID: id, DataDir: filepath.Join(c.cfg.Dir, id),
			LogPath: filepath.Join(c.cfg.Dir, id+".log"), Flags: c.cfg.Flags, Env: c.cfg.Env, Logf: c.cfg.Logf}
		if c.cfg.Node != nil {
			if err := c.cfg.Node(first+j, &s); err != nil {
				return nil, err
			}
		}
		if s.Addrs == (Addrs{}) {
			auto = append(auto, j)
		}
		specs[j] = s
	}
	addrs, err := FreeAddrs(len(auto), c.addrsInUse())
	if err != nil {
		return nil, err
	}
	for x, j := range auto {
		specs[j].Addrs = addrs[x]
	}
	out := make([]*Node, k)
	for j, s := range specs {
		n, err := NewNode(s)
		if err != nil {
			return nil, err
		}
		n.c = c
		for _, x := range auto {
			n.auto = n.auto || x == j
		}
		out[j] = n
	}
	return out, nil
}

// startAll launches every node, then waits for the cluster to form.
func (c *Cluster) startAll(ctx context.Context) error {
	start := time.Now()
	nodes := c.Nodes()
	for _, n := range nodes {
		if err := n.Launch(); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := n.WaitHealthy(ctx, startWait); err != nil {
			return err
		}
	}
	l, err := c.WaitLeader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	if err := c.WaitVoters(ctx, 20*time.Second, nodes...); err != nil {
		return err
	}
	c.logf("cluster of %d formed in %v; leader %s", len(nodes), time.Since(start).Round(time.Millisecond), l.ID())
	return nil
}

// withLogs appends the end of every node's log to err.
func (c *Cluster) withLogs(err error) error {
	var b strings.Builder
	for _, n := range c.all() {
		fmt.Fprintf(&b, "\n----- end of %s (%s) -----\n%s", n.LogPath(), n.ID(), n.Tail(15))
	}
	return fmt.Errorf("%w%s", err, b.String())
}

// clearDir removes what dir holds (not dir itself: it may be a mountpoint).
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing there
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

func (c *Cluster) all() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Nodes lists the cluster's nodes, running or not, without removed ones.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if !c.removed[n] {
			out = append(out, n)
		}
	}
	return out
}

// Node is the node with the given id (nil if none).
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.all() {
		if n.ID() == id {
			return n
		}
	}
	return nil
}

// Running lists the nodes whose process is up (paused ones included).
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// URLs are the HTTP base URLs of Nodes.
func (c *Cluster) URLs() []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.URL())
	}
	return out
}

// joinList is --join: the gossip addresses of the cluster's nodes.
func (c *Cluster) joinList() string {
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addrs().Gossip)
	}
	return strings.Join(addrs, ",")
}

// addrsInUse are every address of every node made.
func (c *Cluster) addrsInUse() map[string]bool {
	used := map[string]bool{}
	for _, n := range c.all() {
		for _, a := range n.Addrs().list() {
			used[a] = true
		}
	}
	return used
}

// Stop kills every process the cluster started (SIGKILL, by its handle).
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.all() {
		errs = append(errs, n.Kill())
	}
	return errors.Join(errs...)
}

// poll calls try every `every` until it returns nil, for at most within.
func poll(ctx context.Context, within, every time.Duration, try func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		err := try(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodeproc: not within %v: %w", within, err)
		case <-time.After(every):
		}
	}
}

// Leader asks every running, unpaused node who leads. It returns the
// leader when all of them answer and name the same node, and that node is
// running and unpaused itself.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	id := ""
	var seen []string
	for _, n := range c.Nodes() {
		if !n.Running() || n.Paused() {
			continue
		}
		v, err := n.ClusterView(ctx)
		if err != nil {
			return nil, err
		}
		seen = append(seen, n.ID()+"→"+v.Leader.ID)
		if v.Leader.ID == "" || (id != "" && v.Leader.ID != id) {
			return nil, fmt.Errorf("no leader all nodes agree on: %s", strings.Join(seen, " "))
		}
		id = v.Leader.ID
	}
	if id == "" {
		return nil, errors.New("no node is running")
	}
	l := c.Node(id)
	if l == nil || !l.Running() || l.Paused() {
		return nil, fmt.Errorf("the named leader %s is not running: %s", id, strings.Join(seen, " "))
	}
	return l, nil
}

// WaitLeader polls Leader until it answers, for at most within.
func (c *Cluster) WaitLeader(ctx context.Context, within time.Duration) (*Node, error) {
	var l *Node
	err := poll(ctx, within, 50*time.Millisecond, func(ctx context.Context) error {
		var err error
		l, err = c.Leader(ctx)
		return err
	})
	return l, err
}

// AwaitNewLeader polls the running nodes other than old every 10 ms until
// one of them names a leader other than old, for at most within; it
// returns that leader.
func (c *Cluster) AwaitNewLeader(ctx context.Context, old string, within time.Duration) (*Node, error) {
	var l *Node
	err := poll(ctx, within, 10*time.Millisecond, func(ctx context.Context) error {
		var seen []string
		for _, n := range c.Nodes() {
			if n.ID() == old || !n.Running() || n.Paused() {
				continue
			}
			v, err := n.ClusterView(ctx)
			if err != nil {
				seen = append(seen, err.Error())
				continue
			}
			seen = append(seen, n.ID()+"→"+v.Leader.ID)
			if v.Leader.ID != "" && v.Leader.ID != old {
				if l = c.Node(v.Leader.ID); l == nil {
					return fmt.Errorf("%s names an unknown leader %q", n.ID(), v.Leader.ID)
				}
				return nil
			}
		}
		return fmt.Errorf("no node shows a leader other than %s: %s", old, strings.Join(seen, " "))
	})
	return l, err
}

// Healthy waits, for at most within, until every node is running and not
// paused, answers /health with 200, and all agree on one leader.
func (c *Cluster) Healthy(ctx context.Context, within time.Duration) error {
	return poll(ctx, within, 100*time.Millisecond, func(ctx context.Context) error {
		for _, n := range c.Nodes() {
			switch {
			case !n.Running():
				return fmt.Errorf("%s is down", n.ID())
			case n.Paused():
				return fmt.Errorf("%s is paused", n.ID())
			}
			status, _, err := n.Do(ctx, http.MethodGet, "/health", nil)
			if err != nil {
				return fmt.Errorf("%s: %w", n.ID(), err)
			}
			if status != http.StatusOK {
				return fmt.Errorf("%s: /health %d", n.ID(), status)
			}
		}
		_, err := c.Leader(ctx)
		return err
	})
}
