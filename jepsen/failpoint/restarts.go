package failpoint

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

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
