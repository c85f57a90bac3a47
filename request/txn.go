package request

import (
	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
)

// Txn is a transaction as a front end decoded it (spec §4.5, addendum §1):
// acks and pushes in Ops, KV ops in KV, timers in Timers (both riders at
// the body's root), lease evidence per ack or in RequiredLeases.
type Txn struct {
	Ops []TxnOp
	// NoOperations: the request had no operations member at all (which
	// words the refusal of an empty transaction).
	NoOperations   bool
	RequiredLeases []string
	KV             []KVOp
	Timers         []TimerOp
}

// TxnOp is one operation: exactly one of Ack and Push, or neither for an
// operation type the API does not know (Unknown is the type as sent).
type TxnOp struct {
	Ack     *Ack
	Push    []PushItem // one push op may carry several items
	Unknown string
}

// UnknownOpType is a transaction with an operation type the API does not
// know: a verdict (HTTP 200, success:false), not a 4xx (spec §4.5), given
// only once every op is otherwise valid.
type UnknownOpType struct{ Type string }

func (e *UnknownOpType) Error() string { return "Unknown operation type: " + e.Type }

// Transaction turns a transaction into its command, or a refusal (an
// *Error), or an *UnknownOpType verdict. An ack with a status the API does
// not know reads as completed (addendum §4.5).
func Transaction(in Txn) (*command.Transaction, error) {
	if len(in.Ops) == 0 && len(in.KV) == 0 && len(in.Timers) == 0 {
		if in.NoOperations {
			return nil, Bad("operations array required")
		}
		return nil, Bad("operations array cannot be empty")
	}
	out := &command.Transaction{RequiredLeases: in.RequiredLeases}
	var unknown *string
	for i := range in.Ops {
		op := &in.Ops[i]
		switch {
		case op.Ack != nil:
			it, known, err := ackItem(*op.Ack, false)
			if err != nil {
				return nil, err
			}
			if !known {
				it.Status = command.AckStatus_COMPLETED
			}
			out.Ops = append(out.Ops, &command.TxnOp{Op: &command.TxnOp_Ack{Ack: it}})
		case op.Push != nil:
			items, err := Push(op.Push)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				out.Ops = append(out.Ops, &command.TxnOp{Op: &command.TxnOp_Push{Push: it}})
			}
		case unknown == nil:
			unknown = &op.Unknown
		}
	}
	var err error
	if out.Kv, err = KVOps(in.KV, true); err != nil {
		return nil, err
	}
	if out.Timers, err = TimerOps(in.Timers, false); err != nil {
		return nil, err
	}
	if unknown != nil {
		return nil, &UnknownOpType{Type: *unknown}
	}
	id := uuid.New()
	out.TransactionId = id[:]
	return out, nil
}
