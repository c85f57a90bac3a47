package fsm

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/kvstore"
)

// kvOps applies KV ops in order and returns their results and the index of
// the first required op that lost its precondition (-1 if none). The caller
// discards the command's writes when one lost.
func (c *applyCtx) kvOps(ops []*fsmpb.KVOp) ([]*fsmpb.KVResult, int) {
	out := make([]*fsmpb.KVResult, 0, len(ops))
	for i, op := range ops {
		r := kvstore.Apply(c.tx, op, c.now, c.index)
		out = append(out, r)
		if op.Required && kvstore.Gates(op.Kind) && !r.Applied {
			return out, i
		}
	}
	return out, -1
}

// applyKV is POST /api/v1/kv with at least one write: one entry, ops in
// order; a required op that loses rolls the whole call back.
func applyKV(c *applyCtx, cmd *fsmpb.Command) (proto.Message, bool) {
	in := cmd.GetKv()
	if c.meta.KvDisabled {
		return &fsmpb.KVBatchResult{Ok: false, Reason: ReasonKVDisabled, FailedIndex: -1}, false
	}
	res, failed := c.kvOps(in.Ops)
	if failed >= 0 {
		return &fsmpb.KVBatchResult{Ok: false, Reason: ReasonKVPrecondition, FailedIndex: int32(failed), Results: res}, false
	}
	return &fsmpb.KVBatchResult{Ok: true, Results: res, FailedIndex: -1}, true
}

func itoa(i int) string { return strconv.Itoa(i) }
