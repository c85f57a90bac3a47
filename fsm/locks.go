package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
)

// applyLocks is POST /api/v1/locks: one entry, independent ops decided by
// package locks at the entry's time. A permit is a KV row, so the
// operator's KV switch stops locks too.
func applyLocks(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if off := locksSwitchedOff(c.meta); off != nil {
		return off, false
	}
	return &command.LocksResult{Results: locks.Apply(c.tx, cmd.GetLocks().Ops, c.now, c.index)}, true
}
