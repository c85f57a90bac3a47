package failpoint

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

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
