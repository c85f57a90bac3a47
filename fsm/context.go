package fsm

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/timers"
)

// applyCtx is one command's view of the state: its staged transaction of
// the state file, the queue domain's Tx over it, the entry's index, term
// and time, and the FSM's meta record.
type applyCtx struct {
	tx    *store.Tx
	q     *queue.Tx
	index uint64
	term  uint64 // the Raft term the entry was appended in
	now   int64  // µs, the entry's effective time
	meta  *command.MetaRecord
	all   bool // the command may change what any queue offers (a switch)
}

// timers is the timers' view of this command; fired messages go through
// the queue domain's push path.
func (c *applyCtx) timers() *timers.Tx { return timers.Begin(c.tx, c.now, c.q) }
