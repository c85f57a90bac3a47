package failpoint

import (
	"context"
	"fmt"
	"math/rand"

	"github.com/queen-node/queen-node/jepsen/harness"
)

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
