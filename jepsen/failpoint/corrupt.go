package failpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

// corruptKinds are the files corrupt damages, by the name it reports:
// the message segments and their indexes (CRC-32C per record and entry),
// the Raft log's segments (a CRC-32C per command entry) and the snapshots
// (raft's CRC-64 of the whole file, and the message files inside). The
// state file (fsm.db) is left alone: it has no content checksum yet, so
// nothing would find its damage (issue 23 leaves that open).
var corruptKinds = []struct {
	name    string
	pattern string // under the data dir
}{
	{"segment", "messages/*/*.log"},
	{"index", "messages/*/*.index"},
	{"raft-log", "raft/wal/*.wal"},
	{"snapshot", "raft/snapshots/*/state.bin"},
}

type corrupt struct{}

func (corrupt) Name() string                    { return "corrupt" }
func (corrupt) Available(*harness.Cluster) bool { return true }

// Inject stops a node (the leader half the time) with SIGTERM, flips one
// bit of, or cuts the tail off, one of its files of a kind picked at
// random, and starts it again, as a disk's silent errors would leave it:
// the node must find the damage where it reads it and never serve it (the
// queue checker holds every delivered payload against the one pushed). The
// heal is the operator's procedure for a damaged node (README, "Damaged
// files"): remove it from the cluster, and a new node joins empty.
func (corrupt) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	n, who := target(ctx, c, rng)
	if n == nil {
		return nil, "", fmt.Errorf("no node to damage")
	}
	if _, _, err := n.Terminate(30 * time.Second); err != nil {
		return nil, "", err
	}
	what, err := damageOneFile(n.DataDir(), rng)
	if rerr := c.Restart(n); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, "", err
	}
	heal := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := c.RemoveNode(ctx, n); err != nil {
			return fmt.Errorf("remove the damaged %s: %w", n.ID(), err)
		}
		_, err := c.AddNode(ctx)
		return err
	}
	return heal, fmt.Sprintf("damage %s's files: %s; replace it after", who, what), nil
}

// damageOneFile damages one file under dir of a kind picked at random among
// those dir holds, and says what it did.
func damageOneFile(dir string, rng *rand.Rand) (string, error) {
	type candidate struct{ kind, path string }
	var cands []candidate
	for _, k := range corruptKinds {
		paths, _ := filepath.Glob(filepath.Join(dir, k.pattern))
		for _, p := range paths {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				cands = append(cands, candidate{k.name, p})
			}
		}
	}
	if len(cands) == 0 {
		return "no file to damage yet", nil
	}
	// A kind first, then one of its files: every kind is tried as often,
	// however many files each has.
	byKind := map[string][]string{}
	var kinds []string
	for _, c := range cands {
		if byKind[c.kind] == nil {
			kinds = append(kinds, c.kind)
		}
		byKind[c.kind] = append(byKind[c.kind], c.path)
	}
	kind := kinds[rng.Intn(len(kinds))]
	path := byKind[kind][rng.Intn(len(byKind[kind]))]
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	rel, _ := filepath.Rel(dir, path)
	if rng.Intn(3) == 0 && len(b) > 1 {
		cut := 1 + rng.Intn(min(len(b)-1, 4096))
		if err := os.Truncate(path, int64(len(b)-cut)); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s: the last %d bytes cut off", kind, rel, cut), nil
	}
	off := rng.Intn(len(b))
	bit := byte(1) << rng.Intn(8)
	b[off] ^= bit
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: bit %#02x of byte %d flipped", kind, rel, bit, off), nil
}

type rolling struct{}

func (rolling) Name() string                    { return "rolling" }
func (rolling) Available(*harness.Cluster) bool { return true }

// Inject restarts every node in turn with SIGTERM, as a rolling upgrade
// does: each stops (a leader hands its leadership over first), starts on
// its data dir, and the cluster is healthy again before the next goes.
func (rolling) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	nodes := c.Nodes()
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	var order []string
	for _, n := range nodes {
		if _, _, err := n.Terminate(30 * time.Second); err != nil {
			return nil, "", err
		}
		if err := c.Restart(n); err != nil {
			return nil, "", err
		}
		if err := c.Healthy(ctx, 60*time.Second); err != nil {
			return nil, "", fmt.Errorf("after restarting %s: %w", n.ID(), err)
		}
		order = append(order, n.ID())
	}
	return func(context.Context) error { return nil }, fmt.Sprintf("rolling SIGTERM restart of %v", order), nil
}

type oneWay struct{}

func (oneWay) Name() string                      { return "one-way" }
func (oneWay) Available(c *harness.Cluster) bool { return c.NetNS() }

// Inject breaks the leader's links in one direction only: a deaf leader
// (it hears nobody, everybody still hears it: its heartbeats hold the
// followers back from an election while it can commit nothing, until it
// sees it lost its quorum and steps down) or a mute one (nobody hears it,
// it hears everybody); or, on five nodes or more, a ring, where each node
// reaches only its two neighbours, both ways.
func (oneWay) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	nodes := c.Nodes()
	heal := func(context.Context) error { return c.Net().Heal() }
	if len(nodes) >= 5 && rng.Intn(3) == 0 {
		ring := make([]int, len(nodes))
		for i, n := range nodes {
			ring[i] = n.Index
		}
		rng.Shuffle(len(ring), func(i, j int) { ring[i], ring[j] = ring[j], ring[i] })
		for i := range ring {
			for j := i + 1; j < len(ring); j++ {
				if j == i+1 || (i == 0 && j == len(ring)-1) {
					continue // neighbours on the ring
				}
				if err := c.Net().Cut(ring[i], ring[j]); err != nil {
					heal(ctx)
					return nil, "", err
				}
			}
		}
		return heal, fmt.Sprintf("ring %v", ring), nil
	}
	l, err := c.Leader(ctx)
	if err != nil {
		return nil, "", err
	}
	deaf := rng.Intn(2) == 0
	for _, n := range nodes {
		if n == l {
			continue
		}
		from, to := n.Index, l.Index // deaf: the leader drops what the others send
		if !deaf {
			from, to = l.Index, n.Index
		}
		if err := c.Net().OneWay(from, to); err != nil {
			heal(ctx)
			return nil, "", err
		}
	}
	if deaf {
		return heal, "deaf leader " + l.ID() + " (it hears nobody)", nil
	}
	return heal, "mute leader " + l.ID() + " (nobody hears it)", nil
}

type slowDisk struct{}

func (slowDisk) Name() string                      { return "slow-disk" }
func (slowDisk) Available(c *harness.Cluster) bool { return c.LossyFS() }

// Inject delays every fsync of one or two nodes (the leader among them half
// the time) by 100–500 ms, under the load the workloads keep up.
func (slowDisk) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	first, who := target(ctx, c, rng)
	if first == nil {
		return nil, "", fmt.Errorf("no node to slow down")
	}
	slow := []*harness.Node{first}
	if rng.Intn(2) == 0 {
		for _, n := range c.Nodes() {
			if n != first && n.Running() {
				slow, who = append(slow, n), who+" and "+n.ID()
				break
			}
		}
	}
	d := time.Duration(100+rng.Intn(401)) * time.Millisecond
	for _, n := range slow {
		if err := c.SlowDisk(n, d); err != nil {
			return nil, "", err
		}
	}
	heal := func(context.Context) error {
		for _, n := range slow {
			c.SlowDisk(n, 0)
		}
		return nil
	}
	return heal, fmt.Sprintf("fsyncs of %s wait %v", who, d), nil
}

type diskFull struct{}

func (diskFull) Name() string                      { return "disk-full" }
func (diskFull) Available(c *harness.Cluster) bool { return c.LossyFS() }

// Inject fills the data disk of the leader or of a follower (every write
// fails with ENOSPC and the node sees no free space: it refuses writes that
// add data with 507, pauses apply, and its Raft log cannot append), and
// frees it at the heal. A node may stop on it: Raft panics when it cannot
// save a new term or vote (fail-stop is right there), so the heal starts a
// node that exited again, as its supervisor would.
func (diskFull) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	n, who := target(ctx, c, rng)
	if n == nil {
		return nil, "", fmt.Errorf("no node to fill")
	}
	if err := c.FillDisk(n, true); err != nil {
		return nil, "", err
	}
	heal := func(context.Context) error {
		if err := c.FillDisk(n, false); err != nil {
			return err
		}
		// A node that failed a write it cannot take back may still be on
		// its way out: watch it for a while, and start it when it exits.
		for range 50 {
			if !n.Running() {
				return c.Restart(n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	}
	return heal, "the disk of " + who + " is full", nil
}
