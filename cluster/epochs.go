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
	leader string // the epoch's leader ("" = none known)
	ctx    context.Context
	cancel context.CancelFunc
}

func newLeaderEpochs() *leaderEpochs {
	e := &leaderEpochs{}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// of is the context of leader's epoch: the present one if leader is its
// leader, else a new one (the one before ends: this node knows another
// leader now, whichever of Raft's report and a caller's look came first).
func (e *leaderEpochs) of(leader string) context.Context {
	e.mu.Lock()
	defer e.mu.Unlock()
	if leader != e.leader {
		e.cancel()
		e.leader = leader
		e.ctx, e.cancel = context.WithCancel(context.Background())
	}
	return e.ctx
}

// watchLeaders starts a new epoch on every change of leader Raft reports,
// until the node stops (the raft observer may report one leader twice, or
// after a forward already looked: of starts an epoch only for another).
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
		case o := <-ch:
			n.leaders.of(string(o.Data.(raft.LeaderObservation).LeaderID))
		case <-n.stop:
			n.leaders.of("") // the node stops: nothing forwarded waits for it
			return
		}
	}
}
