package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/kvstore"
)

// kvOps applies KV ops in order and returns their results and the index of
// the first required op that lost its precondition (-1 if none). The caller
// discards the command's writes when one lost.
func (c *applyCtx) kvOps(ops []*command.KVOp) ([]*command.KVResult, int) {
	out := make([]*command.KVResult, 0, len(ops))
	for i, op := range ops {
		r := kvstore.Apply(c.tx, op, c.now, c.index)
		out = append(out, r)
		if op.Required && op.Kind.Gates() && !r.Applied {
			return out, i
		}
	}
	return out, -1
}

// applyKV is POST /api/v1/kv with at least one write: one entry, ops in
// order; a required op that loses rolls the whole call back.
func applyKV(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetKv()
	if off := kvSwitchedOff(c.meta); off != nil {
		return off, false
	}
	res, failed := c.kvOps(in.Ops)
	if failed >= 0 {
		return &command.KVBatchResult{Ok: false, Reason: command.Reason_KV_PRECONDITION, FailedIndex: int32(failed), Results: res}, false
	}
	return &command.KVBatchResult{Ok: true, Results: res, FailedIndex: -1}, true
}
