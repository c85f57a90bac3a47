package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/timers"
)

// applyCtx is one command's view of the state: its staged transaction of
// the state file, the queue domain's Tx over it, the entry's index and
// time, and the FSM's meta record.
type applyCtx struct {
	tx    *store.Tx
	q     *queue.Tx
	index uint64
	now   int64 // µs, the entry's effective time
	meta  *command.MetaRecord
	all   bool // the command may change what any queue offers (a switch)
}

// timers is the timers' view of this command; fired messages go through
// the queue domain's push path.
func (c *applyCtx) timers() *timers.Tx { return timers.Begin(c.tx, c.now, c.q) }

func mustUnmarshal(b []byte, m proto.Message) {
	if err := proto.Unmarshal(b, m); err != nil {
		panic("fsm: stored record does not decode: " + err.Error())
	}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("fsm: record does not encode: " + err.Error())
	}
	return b
}
