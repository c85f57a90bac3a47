package cluster

import (
	"context"
	"sync"

	"github.com/hashicorp/raft"
)

// leaderEpochs is this node's view of who leads, as a context per epoch:
// the current one ends when Raft reports another leader (or none). A call
// forwarded to the leader runs under it (forwardInEpoch), so that it ends
// as soon as this node knows that leader was replaced, not at its
// deadline: a deaf leader never answers.
type leaderEpochs struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

func newLeaderEpochs() *leaderEpochs {
	e := &leaderEpochs{}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// current is the context of the present epoch.
func (e *leaderEpochs) current() context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ctx
}

// next ends the present epoch and starts another.
func (e *leaderEpochs) next() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancel()
	e.ctx, e.cancel = context.WithCancel(context.Background())
}

// watchLeaders starts a new epoch on every change of leader Raft reports,
// until the node stops.
func (n *Node) watchLeaders() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-ch:
			n.leaders.next()
		case <-n.stop:
			n.leaders.next()
			return
		}
	}
}
