// Package failpoint holds the faults the fault tests inject: each can say
// whether it is available on this cluster, inject itself, and return the
// function that heals it.
package failpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

// Fault is one kind of failure.
type Fault interface {
	Name() string
	Available(c *harness.Cluster) bool
	// Inject breaks something and returns how to heal it and what it did.
	Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (heal func(context.Context) error, what string, err error)
}

// ByName returns the faults named in a comma list: kill, pause, partition,
// clock, membership, snapshot-membership, powerloss, powerloss-torn,
// corrupt, rolling, one-way, slow-disk, disk-full.
func ByName(names []string) ([]Fault, error) {
	var out []Fault
	for _, n := range names {
		switch n {
		case "kill":
			out = append(out, kill{})
		case "pause":
			out = append(out, pause{})
		case "partition":
			out = append(out, partition{})
		case "clock":
			out = append(out, clock{})
		case "membership":
			out = append(out, membership{})
		case "powerloss":
			out = append(out, powerloss{})
		case "powerloss-torn":
			out = append(out, powerloss{torn: true})
		case "corrupt":
			out = append(out, corrupt{})
		case "rolling":
			out = append(out, rolling{})
		case "snapshot-membership":
			out = append(out, snapshotMembership{})
		case "one-way":
			out = append(out, oneWay{})
		case "slow-disk":
			out = append(out, slowDisk{})
		case "disk-full":
			out = append(out, diskFull{})
		default:
			return nil, fmt.Errorf("unknown fault %q (kill, pause, partition, clock, membership, snapshot-membership, powerloss, powerloss-torn, corrupt, rolling, one-way, slow-disk, disk-full)", n)
		}
	}
	return out, nil
}

// NeedsLossyFS reports whether any of the named faults needs the data dirs
// on lossyfs (power loss, a slow disk, a full disk).
func NeedsLossyFS(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, "powerloss") || n == "slow-disk" || n == "disk-full" {
			return true
		}
	}
	return false
}

// target picks the leader half of the time, a random running node otherwise.
func target(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (*harness.Node, string) {
	if rng.Intn(2) == 0 {
		if l, err := c.Leader(ctx); err == nil {
			return l, "the leader " + l.ID()
		}
	}
	var up []*harness.Node
	for _, n := range c.Nodes() {
		if n.Running() && !n.Paused() {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil, ""
	}
	n := up[rng.Intn(len(up))]
	return n, n.ID()
}

type kill struct{}

func (kill) Name() string                    { return "kill" }
func (kill) Available(*harness.Cluster) bool { return true }
func (kill) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	n, who := target(ctx, c, rng)
	if n == nil {
		return nil, "", fmt.Errorf("no node to kill")
	}
	if err := n.Kill(); err != nil {
		return nil, "", err
	}
	return func(context.Context) error { return c.Restart(n) }, "kill -9 " + who, nil
}

type pause struct{}

func (pause) Name() string                    { return "pause" }
func (pause) Available(*harness.Cluster) bool { return true }
func (pause) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	n, who := target(ctx, c, rng)
	if n == nil {
		return nil, "", fmt.Errorf("no node to pause")
	}
	if err := n.Pause(); err != nil {
		return nil, "", err
	}
	return func(context.Context) error { return n.Resume() }, "SIGSTOP " + who, nil
}

type partition struct{}

func (partition) Name() string                      { return "partition" }
func (partition) Available(c *harness.Cluster) bool { return c.NetNS() }
func (partition) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	nodes := c.Nodes()
	idx := make([]int, len(nodes))
	for i, n := range nodes {
		idx[i] = n.Index
	}
	rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	var what string
	var err error
	switch rng.Intn(3) {
	case 0: // isolate the leader
		l, lerr := c.Leader(ctx)
		if lerr != nil {
			return nil, "", lerr
		}
		var rest []int
		for _, i := range idx {
			if i != l.Index {
				rest = append(rest, i)
			}
		}
		err = c.Net().Partition([][]int{{l.Index}, rest})
		what = "isolate the leader " + l.ID()
	case 1: // majority / minority
		cut := len(idx) / 2
		err = c.Net().Partition([][]int{idx[:cut], idx[cut:]})
		what = fmt.Sprintf("partition %v | %v", idx[:cut], idx[cut:])
	default: // a bridge: two sides that each see the middle node only
		if len(idx) < 3 {
			return nil, "", fmt.Errorf("a bridge needs 3 nodes")
		}
		mid := idx[0]
		left, right := idx[1:1+(len(idx)-1)/2], idx[1+(len(idx)-1)/2:]
		for _, a := range left {
			for _, b := range right {
				if err = c.Net().Cut(a, b); err != nil {
					break
				}
			}
		}
		what = fmt.Sprintf("bridge %v - %d - %v", left, mid, right)
	}
	if err != nil {
		c.Net().Heal()
		return nil, "", err
	}
	return func(context.Context) error { return c.Net().Heal() }, what, nil
}

type clock struct{}

func (clock) Name() string                    { return "clock" }
func (clock) Available(*harness.Cluster) bool { return true }

// Inject jumps the leader's wall clock by ±(30..300) s, then makes it step
// down and back later: the stamp clock must neither go back nor let leases
// end early by more than its slew bound.
func (clock) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	var skewed []*harness.Node
	ms := int64(30000 + rng.Intn(270000))
	if rng.Intn(2) == 0 {
		ms = -ms
	}
	for _, n := range c.Nodes() {
		if !n.Running() || n.Paused() || rng.Intn(2) == 0 {
			continue
		}
		body, _ := json.Marshal(map[string]int64{"ms": ms})
		if code, _, err := n.Do(ctx, http.MethodPost, "/debug/clock-skew", body); err == nil && code == http.StatusOK {
			skewed = append(skewed, n)
		}
	}
	if l, err := c.Leader(ctx); err == nil {
		l.Do(ctx, http.MethodPost, "/debug/step-down", nil) // a new leader anchors its clock
	}
	var ids []string
	for _, n := range skewed {
		ids = append(ids, n.ID())
	}
	heal := func(ctx context.Context) error {
		for _, n := range skewed {
			if n.Running() {
				n.Do(ctx, http.MethodPost, "/debug/clock-skew", []byte(`{"ms":0}`))
			}
		}
		return nil
	}
	return heal, fmt.Sprintf("clock of %v jumps %+ds, leader steps down", ids, ms/1000), nil
}

type membership struct{}

func (membership) Name() string                    { return "membership" }
func (membership) Available(*harness.Cluster) bool { return true }

// Inject adds a node, removes a node, or replaces one (remove, then add).
func (membership) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	nodes := c.Nodes()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	switch {
	case len(nodes) <= 3 || rng.Intn(3) == 0:
		n, err := c.AddNode(ctx)
		if err != nil {
			return nil, "", err
		}
		return func(context.Context) error { return nil }, "add " + n.ID(), nil
	case rng.Intn(2) == 0:
		victim := nodes[rng.Intn(len(nodes))]
		if err := c.RemoveNode(ctx, victim); err != nil {
			return nil, "", err
		}
		return func(context.Context) error { return nil }, "remove " + victim.ID(), nil
	default:
		victim := nodes[rng.Intn(len(nodes))]
		if err := c.RemoveNode(ctx, victim); err != nil {
			return nil, "", err
		}
		n, err := c.AddNode(ctx)
		if err != nil {
			return nil, "", err
		}
		return func(context.Context) error { return nil }, "replace " + victim.ID() + " with " + n.ID(), nil
	}
}

// powerloss cuts the power of one node (the leader half the time) or, one
// time in four, of every node at once: SIGKILL, and every write the node
// did not fsync is gone (the data dirs are on lossyfs). After a whole-cluster
// power loss only what each node fsynced survives anywhere: the Raft logs,
// the snapshots, and the state files as of their last snapshot. The heal
// boots the nodes again with a new boot id, so each knows its machine went
// down. The torn variant lets a random half of the unsynced pages reach the
// disk first, in no order, as a disk that was part-way through writing back
// its page cache would.
type powerloss struct{ torn bool }

func (p powerloss) Name() string {
	if p.torn {
		return "powerloss-torn"
	}
	return "powerloss"
}

func (powerloss) Available(c *harness.Cluster) bool { return c.LossyFS() }

func (p powerloss) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	var victims []*harness.Node
	var who string
	if rng.Intn(4) == 0 {
		victims, who = c.Nodes(), "every node"
	} else {
		n, w := target(ctx, c, rng)
		if n == nil {
			return nil, "", fmt.Errorf("no node to power off")
		}
		victims, who = []*harness.Node{n}, w
	}
	mode := harness.PowerLossMode{}
	if p.torn {
		mode = harness.PowerLossMode{Torn: true, Keep: 0.5, Rng: rand.New(rand.NewSource(rng.Int63()))}
	}
	losses, err := c.PowerOff(victims, mode)
	heal := func(context.Context) error {
		var first error
		for _, n := range victims {
			if err := c.Restart(n); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if err != nil {
		heal(ctx)
		return nil, "", err
	}
	var ids []string
	for id := range losses {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		parts = append(parts, id+": "+losses[id].String())
	}
	return heal, fmt.Sprintf("power loss of %s (%s) [%s]", who, mode, strings.Join(parts, "; ")), nil
}
