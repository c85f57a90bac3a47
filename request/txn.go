package request

import (
	"fmt"

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
	Positions      []Position
}

// Position is one element of a transaction's positions rider (addendum
// §4.2): where a consumer group reads one partition next.
type Position struct {
	Queue         string
	ConsumerGroup string
	Partition     string // "" = Default
	HasPartition  bool
	Offset        int64 // the first offset the group reads next
	Forget        bool  // offset null: forget the position
	Metadata      []byte
	// SubscriptionMode and SubscriptionFrom register a group the queue
	// does not know yet, as a pop's do.
	SubscriptionMode, SubscriptionFrom string
}

// TxnRefused is a transaction refused before it became an entry with a
// verdict of the 2.x vocabulary (addendum §4.5: name_too_long,
// kv_key_too_large, too_large): HTTP 200, success:false, like the verdicts
// apply gives.
type TxnRefused struct{ Result *command.TxnResult }

func (e *TxnRefused) Error() string { return e.Result.Error }

// txnVerdict turns a refusal of the limits that a transaction answers as a
// verdict into one; any other error is returned as it is.
func txnVerdict(err error) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	reason := map[string]command.Reason{codeNameTooLong: command.Reason_NAME_TOO_LONG,
		codeKVKeyTooLarge: command.Reason_KV_KEY_TOO_LARGE, codeTooLarge: command.Reason_TOO_LARGE}[e.Code]
	if reason == command.Reason_NONE {
		return err
	}
	text := e.Msg
	if e.Detail != "" {
		text = e.Detail
	}
	return &TxnRefused{Result: &command.TxnResult{Reason: reason, Error: text, FailedIndex: -1}}
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
func (r *Rules) Transaction(in Txn) (*command.Transaction, error) {
	out, err := r.transaction(in)
	return out, txnVerdict(err)
}

func (r *Rules) transaction(in Txn) (*command.Transaction, error) {
	if len(in.Ops) == 0 && len(in.KV) == 0 && len(in.Timers) == 0 && len(in.Positions) == 0 {
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
	if out.Positions, err = r.positions(in.Positions); err != nil {
		return nil, err
	}
	if unknown != nil {
		return nil, &UnknownOpType{Type: *unknown}
	}
	inheritLease(out)
	id := uuid.New()
	out.TransactionId = id[:]
	return out, nil
}

// inheritLease is the 2.x lease rule (addendum §4.5): an ack uses its own
// leaseId; an ack without one inherits a lease only when requiredLeases and
// the other acks' leaseIds name exactly one lease, and is unfenced
// otherwise. The rule is decided here, so the entry carries each ack's
// lease and no requiredLeases (apply reads entries written before the rule
// as it always did).
func inheritLease(t *command.Transaction) {
	named := map[string]bool{}
	for _, l := range t.RequiredLeases {
		if l != "" {
			named[l] = true
		}
	}
	for _, op := range t.Ops {
		if a := op.GetAck(); a != nil && a.LeaseId != "" {
			named[a.LeaseId] = true
		}
	}
	t.RequiredLeases = nil
	if len(named) != 1 {
		return
	}
	var only string
	for l := range named {
		only = l
	}
	for _, op := range t.Ops {
		if a := op.GetAck(); a != nil && a.LeaseId == "" {
			a.LeaseId = only
		}
	}
}

// positions checks a transaction's positions rider (addendum §4.2).
func (r *Rules) positions(in []Position) ([]*command.PositionOp, error) {
	if len(in) > MaxPositionsPerCall {
		return nil, Bad(fmt.Sprintf("at most %d positions per transaction", MaxPositionsPerCall))
	}
	out := make([]*command.PositionOp, 0, len(in))
	for i, p := range in {
		at := fmt.Sprintf("positions[%d]: ", i)
		if p.Queue == "" {
			return nil, Bad(at + "queue is required")
		}
		if p.ConsumerGroup == "" {
			return nil, Bad(at + "consumerGroup is required")
		}
		op := &command.PositionOp{Queue: p.Queue, ConsumerGroup: p.ConsumerGroup, Partition: "Default", Forget: p.Forget}
		if p.HasPartition {
			if p.Partition == "" {
				return nil, Bad(at + "partition must not be empty")
			}
			op.Partition = p.Partition
		}
		for _, n := range [][2]string{{"queue", op.Queue}, {"consumerGroup", op.ConsumerGroup}, {"partition", op.Partition}} {
			if err := CheckName(at+n[0], n[1]); err != nil {
				return nil, err
			}
		}
		if !p.Forget {
			if p.Offset < 0 {
				return nil, Bad(at + "offset must be an integer >= 0, or null to forget the position")
			}
			op.Offset = uint64(p.Offset)
		}
		if len(p.Metadata) > MaxPositionMetadata {
			return nil, &Error{Kind: TooLarge, Msg: at + fmt.Sprintf("metadata is larger than %d bytes", MaxPositionMetadata), Code: codeTooLarge}
		}
		op.Metadata = p.Metadata
		op.Subscription, op.SubscriptionFromUs = r.subscription(p.SubscriptionMode, p.SubscriptionFrom)
		out = append(out, op)
	}
	return out, nil
}
