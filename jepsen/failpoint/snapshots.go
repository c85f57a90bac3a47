package failpoint

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

// snapshotMembership changes the membership while a follower installs a
// snapshot (Queen 2.x's campaign runs it; Raft implementations have lost
// configuration entries there, when a snapshot's configuration and the
// log's disagree). A follower is stopped, the load goes on, the leader
// snapshots and cuts its log down to a few entries (the --test-hooks
// /debug/snapshot), so the follower, started again, can only catch up by
// installing the snapshot; right as it starts, a node is added, or one of
// the other followers is replaced by a new one (always, once the cluster
// has grown past its size). The heal waits until every
// node is healthy under one leader.
type snapshotMembership struct{}

func (snapshotMembership) Name() string                    { return "snapshot-membership" }
func (snapshotMembership) Available(*harness.Cluster) bool { return true }

func (snapshotMembership) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	if err != nil {
		return nil, "", err
	}
	var followers []*harness.Node
	for _, n := range c.Nodes() {
		if n != l && n.Running() && !n.Paused() {
			followers = append(followers, n)
		}
	}
	if len(followers) == 0 {
		return nil, "", fmt.Errorf("no follower to install a snapshot")
	}
	f := followers[rng.Intn(len(followers))]
	if _, _, err := f.Terminate(30 * time.Second); err != nil {
		return nil, "", err
	}
	select { // the others go on committing without it
	case <-time.After(time.Duration(500+rng.Intn(1500)) * time.Millisecond):
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	if code, body, err := l.Do(ctx, http.MethodPost, "/debug/snapshot", []byte(`{"trailing":8}`)); err != nil || code != http.StatusOK {
		c.Restart(f)
		return nil, "", fmt.Errorf("snapshot on the leader %s: %d %s %v", l.ID(), code, body, err)
	}
	if err := c.Restart(f); err != nil {
		return nil, "", err
	}
	what := fmt.Sprintf("%s restarted behind the leader %s's snapshot, and meanwhile ", f.ID(), l.ID())
	var others []*harness.Node
	for _, n := range followers {
		if n != f {
			others = append(others, n)
		}
	}
	// a replacement half the time, always once the cluster has grown
	if len(others) > 0 && (rng.Intn(2) == 0 || len(followers)+1 > c.Size()) {
		victim := others[rng.Intn(len(others))]
		if err := c.RemoveNode(ctx, victim); err != nil {
			return nil, "", fmt.Errorf("%sremove %s: %w", what, victim.ID(), err)
		}
		what += "remove " + victim.ID() + " and "
	}
	n, err := c.AddNode(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("%sadd a node: %w", what, err)
	}
	heal := func(ctx context.Context) error { return c.Healthy(ctx, 60*time.Second) }
	return heal, what + "add " + n.ID(), nil
}
