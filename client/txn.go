package queen

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Tx builds a transaction (spec §4.5, addendum §1): acks, pushes, KV
// writes and timer ops that commit in one log entry, all or nothing.
//
//	res, err := c.Transaction().
//		IdempotencyKey("charge/"+order.ID+"/"+msg.LeaseID). // a retry is answered from the record
//		Once("charges", "charge:"+order.ID, time.Hour).      // the gate
//		Ack(msg).
//		Push("receipts", receipt).
//		Timers(queen.CancelTimer("reminders", "order/"+order.ID)).
//		Commit(ctx)
//
// A builder is for one commit; it is not safe for concurrent use.
type Tx struct {
	c    *Client
	req  txnRequest
	msgs []*Message // acked here: settled when the commit succeeds
	err  error
}

// Transaction starts a transaction.
func (c *Client) Transaction() *Tx { return &Tx{c: c} }

// Ack completes m in the transaction, under m's lease and in m's group.
func (tx *Tx) Ack(m *Message) *Tx { return tx.AckStatus(m, Completed, "") }

// AckStatus settles m in the transaction with any status.
func (tx *Tx) AckStatus(m *Message, s AckStatus, reason string) *Tx {
	it := ackOf(m, s, reason)
	tx.req.ops = append(tx.req.ops, txnOp{ack: &it})
	tx.msgs = append(tx.msgs, m)
	return tx
}

// PushOption shapes one pushed message of a transaction.
type PushOption func(*Msg)

// WithTransactionID sets the pushed message's dedup key (default: a new
// UUIDv7).
func WithTransactionID(id string) PushOption { return func(m *Msg) { m.TransactionID = id } }

// WithPartition pushes to a partition other than Default.
func WithPartition(p string) PushOption { return func(m *Msg) { m.Partition = p } }

// WithTraceID sets the pushed message's trace id (a UUID).
func WithTraceID(id string) PushOption { return func(m *Msg) { m.TraceID = id } }

// Push appends payload (marshalled as JSON) to queue in the transaction.
// A transactionId already stored in that partition aborts the whole
// transaction with a *DuplicateError.
func (tx *Tx) Push(queue string, payload any, opts ...PushOption) *Tx {
	op, err := pushOp(queue, payload, opts)
	if err != nil {
		tx.err = errors.Join(tx.err, err)
		return tx
	}
	tx.req.ops = append(tx.req.ops, op)
	return tx
}

// pushOp is a transaction's push of payload to queue.
func pushOp(queue string, payload any, opts []PushOption) (txnOp, error) {
	m := Msg{Data: payload}
	for _, o := range opts {
		o(&m)
	}
	it, err := toPushItem(queue, m)
	return txnOp{push: &it}, err
}

// Timers adds timer ops (ScheduleTimer, RescheduleTimer, CancelTimer) to
// the transaction (the root timers array, addendum §1): they are planned
// with the rest and roll back with it. A cancel that finds nothing pending
// (TimerAbsent) is a result, and the transaction still commits.
func (tx *Tx) Timers(ops ...TimerOp) *Tx {
	in, err := timerOpsOf(ops)
	tx.err = errors.Join(tx.err, err)
	tx.req.timers = append(tx.req.timers, in...)
	return tx
}

// IdempotencyKey sends the commit with an Idempotency-Key (HTTP header
// Idempotency-Key, gRPC metadata idempotency-key). The broker stores the
// first definitive outcome under the key; a retry with the same key and
// the same body, by this client's RetryPolicy or by the caller after an
// unknown outcome, is answered from that record (TxResult.Replayed)
// instead of running again. The same key with another body is refused
// with an *Error matching ErrIdempotencyKeyReused (HTTP 422, gRPC
// FAILED_PRECONDITION) and nothing is applied. A key names one request:
// make it from what identifies the step (e.g. the step, the message and
// its lease).
func (tx *Tx) IdempotencyKey(key string) *Tx {
	tx.req.idemKey = key
	return tx
}

// RequireLeases adds lease evidence for acks (the SDKs' requiredLeases):
// an ack op passes only if one of these leases holds its message.
func (tx *Tx) RequireLeases(ids ...string) *Tx {
	tx.req.requiredLeases = append(tx.req.requiredLeases, ids...)
	return tx
}

// Once is the exactly-once gate: a required putIfAbsent of key (value
// true) that expires after ttl. If the key already exists the whole
// transaction is rolled back and Commit reports the lost gate as a value.
func (tx *Tx) Once(ns, key string, ttl time.Duration) *Tx {
	return tx.KV().PutIfAbsent(ns, key, true, ttl, true)
}

// KV adds KV ops to the transaction (the root kv array).
func (tx *Tx) KV() *TxKV { return &TxKV{tx: tx} }

// TxKV adds KV ops to a transaction. A required op whose precondition
// loses rolls the whole transaction back; one not required just reports
// Applied=false in its result.
type TxKV struct{ tx *Tx }

func (k *TxKV) add(op kvOp, value any) *Tx {
	if op.Op != "delete" {
		v, err := marshalValue(value)
		if err != nil {
			k.tx.err = errors.Join(k.tx.err, err)
			return k.tx
		}
		op.Value = v
	}
	k.tx.req.kv = append(k.tx.req.kv, op)
	return k.tx
}

// PutIfAbsent stores value under key unless the key exists; ttl <= 0 keeps
// it forever.
func (k *TxKV) PutIfAbsent(ns, key string, value any, ttl time.Duration, required bool) *Tx {
	return k.add(kvOp{Op: "putIfAbsent", NS: ns, Key: key, TTL: ttl, Required: required}, value)
}

// Put stores value under key; ttl <= 0 keeps it forever.
func (k *TxKV) Put(ns, key string, value any, ttl time.Duration, required bool) *Tx {
	return k.add(kvOp{Op: "put", NS: ns, Key: key, TTL: ttl, Required: required}, value)
}

// PutIfVersion stores value only if key is at version (0: absent).
func (k *TxKV) PutIfVersion(ns, key string, value any, ttl time.Duration, version uint64, required bool) *Tx {
	return k.add(kvOp{Op: "put", NS: ns, Key: key, TTL: ttl, Expect: &version, Required: required}, value)
}

// Delete removes key.
func (k *TxKV) Delete(ns, key string, required bool) *Tx {
	return k.add(kvOp{Op: "delete", NS: ns, Key: key, Required: required}, nil)
}

// TxResult is a transaction's outcome. A lost required gate is not an
// error: Committed=false and Precondition says which gate and what it
// found (the normal outcome of a duplicate delivery).
type TxResult struct {
	Committed     bool
	TransactionID string
	Results       []TxItem      // one per op (acks and pushes in order, then KV ops, then timer ops), when committed
	Precondition  *Precondition // when a required KV gate lost
	// Replayed: the broker answered from the record its Idempotency-Key
	// kept of an earlier send of the same commit; nothing ran again.
	Replayed bool
}

// TxItem is the result of one op of a committed transaction.
type TxItem struct {
	Type          string // ack | push | kv | timer
	TransactionID string
	MessageID     string
	PartitionID   string
	Queue         string
	DLQ           bool
	LeaseReleased bool
	KV            *KVWrite
	Timer         *TimerResult
}

// Precondition is the gate that lost.
type Precondition struct {
	FailedIndex int    // in Results' index space
	Reason      string // exists | absent | version | ...
	Version     uint64
	Value       json.RawMessage // what the gate found
}

// Commit sends the transaction. Refusals are typed: *RejectedAckError (an
// ack no longer held its message), *DuplicateError (a push repeated a
// transactionId), *TxError (anything else); a lost required gate is a
// value (TxResult.Precondition) and err is nil. In every refused case
// nothing was written. A refusal the broker replayed from an
// Idempotency-Key's record is the same error, and the TxResult returned
// beside it says Replayed.
func (tx *Tx) Commit(ctx context.Context) (*TxResult, error) {
	if tx.err != nil {
		return nil, tx.err
	}
	res, err := do(ctx, tx.c.retry, func(ctx context.Context) (*TxResult, error) {
		return tx.c.t.transaction(ctx, &tx.req)
	})
	if err != nil {
		return res, err
	}
	if res.Committed {
		for _, m := range tx.msgs {
			m.settled.Store(true)
		}
	}
	return res, nil
}

// verdict fills in a refused transaction's outcome: a value for a lost
// gate, a typed error for everything else.
func verdict(res *TxResult, reason, text string, failedIndex int, failed *kvResult) error {
	switch reason {
	case "kv_precondition":
		p := &Precondition{FailedIndex: failedIndex}
		if failed != nil {
			p.Reason, p.Version, p.Value = failed.Reason, failed.Version, failed.Value
		}
		res.Precondition = p
		return nil
	case "rejected_ack":
		return &RejectedAckError{Message: text, Index: failedIndex}
	case "duplicate":
		return &DuplicateError{Message: text}
	}
	return &TxError{Reason: reason, Message: text}
}
