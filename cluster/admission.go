package cluster

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// Admission (addendum §4.9): a node takes a client's write only while it has
// room for it. Room is a slot among MaxInflight (the writes waiting for
// their entry here, proposed or forwarded: beyond them a write is refused
// with ErrOverloaded instead of queueing without bound), and, for a write
// that adds data, a data disk that is not nearly full (ErrStorageFull). A
// forwarded write is admitted twice, by the node the client called and by
// the leader, so either one's limits hold. The leader's own entries
// (sweeps, retention, timers) are never refused: they are what frees space.

// DefaultMaxInflight is MaxInflight when the config leaves it 0.
const DefaultMaxInflight = 1024

// admit takes a slot for cmd, or says why it cannot; release gives it back.
func (n *Node) admit(cmd *command.Command) (release func(), err error) {
	if k := fsm.KindOf(cmd); k != nil && k.WhenFull == fsm.RefusedWhenFull && n.disk.Low() {
		return nil, ErrStorageFull
	}
	select {
	case n.slots <- struct{}{}:
		return func() { <-n.slots }, nil
	default:
		return nil, ErrOverloaded
	}
}
