package queen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Timers are messages scheduled to be appended to a queue later (addendum
// §1–§2): a timer is named by its queue and key, fires once its delay has
// passed on the leader's clock (never before), and then becomes an ordinary
// message of that queue, with the timer's txn as its transactionId. A
// schedule of a key that is pending replaces it; a cancel of a key that is
// not pending (never scheduled, cancelled, or already fired) answers
// TimerAbsent, which is not an error.
//
// Ops are made by ScheduleTimer, RescheduleTimer and CancelTimer and sent
// on their own (Timers.Apply) or with acks, pushes and KV writes in one
// transaction (Tx.Timers), where they share its fate.
type Timers struct{ c *Client }

// Timers is the broker's timers.
func (c *Client) Timers() *Timers { return &Timers{c: c} }

// TimerStatus is the outcome of one timer op.
type TimerStatus string

// Timer statuses (addendum §1.6, §1.7).
const (
	TimerScheduled   TimerStatus = "scheduled"
	TimerRescheduled TimerStatus = "rescheduled" // it replaced a pending timer of the same key
	TimerCancelled   TimerStatus = "cancelled"
	TimerAbsent      TimerStatus = "absent" // a cancel found nothing pending: not an error
)

// TimerOp is one timer op, for Timers.Apply or Tx.Timers. A TimerOp that
// could not be built (a payload that does not marshal, an option that does
// not apply) makes the call that sends it fail without sending anything.
type TimerOp struct {
	op  timerOp
	err error
}

// ScheduleTimer schedules data (marshalled as JSON; json.RawMessage is sent
// as is) to be appended to queue after delay, as the timer named key. A
// pending timer of the same key is replaced. WithTransactionID sets the
// fired message's transactionId (the timer's txn; default: a new UUIDv7,
// minted here, so a retried schedule carries the same one) and
// WithPartition its partition (default "Default"). A fired message carries
// no trace id, so WithTraceID is refused.
func ScheduleTimer(queue, key string, delay time.Duration, data any, opts ...PushOption) TimerOp {
	return scheduleOp("schedule", queue, key, delay, data, opts)
}

// RescheduleTimer is ScheduleTimer under the other name the broker gives
// the same upsert.
func RescheduleTimer(queue, key string, delay time.Duration, data any, opts ...PushOption) TimerOp {
	return scheduleOp("reschedule", queue, key, delay, data, opts)
}

func scheduleOp(kind, queue, key string, delay time.Duration, data any, opts []PushOption) TimerOp {
	m := Msg{Data: data}
	for _, o := range opts {
		o(&m)
	}
	if m.TraceID != "" {
		return TimerOp{err: fmt.Errorf("queen: %s timer %s/%s: a fired message carries no trace id", kind, queue, key)}
	}
	it, err := toPushItem(queue, m)
	if err != nil {
		return TimerOp{err: err}
	}
	return TimerOp{op: timerOp{Op: kind, Queue: queue, Key: key, Partition: it.Partition,
		DelayMs: float64(delay) / float64(time.Millisecond), Txn: it.TransactionID, Payload: it.Payload}}
}

// CancelTimer cancels the pending timer named key on queue.
// WithTransactionID names a txn the broker echoes when nothing is pending;
// no other option applies.
func CancelTimer(queue, key string, opts ...PushOption) TimerOp {
	var m Msg
	for _, o := range opts {
		o(&m)
	}
	if m.Partition != "" || m.TraceID != "" {
		return TimerOp{err: fmt.Errorf("queen: cancel timer %s/%s: only WithTransactionID applies", queue, key)}
	}
	return TimerOp{op: timerOp{Op: "cancel", Queue: queue, Key: key, Txn: m.TransactionID}}
}

func timerOpsOf(ops []TimerOp) ([]timerOp, error) {
	out := make([]timerOp, len(ops))
	var errs []error
	for i, o := range ops {
		out[i] = o.op
		errs = append(errs, o.err)
	}
	return out, errors.Join(errs...)
}

// TimerResult is the broker's answer to one timer op.
type TimerResult struct {
	OK            bool // false only for TimerAbsent
	Status        TimerStatus
	Queue, Key    string
	TransactionID string    // the txn: a cancelled timer's stored one, or the echo on absent
	MessageID     string    // scheduled, rescheduled: the id the fired message will have
	DeliverAt     time.Time // scheduled, rescheduled: due from then on (the leader's clock)
}

// Timer is a pending timer as Get and List read it.
type Timer struct {
	Found         bool // Get: false when nothing is pending under the key
	Queue, Key    string
	Partition     string
	DeliverAt     time.Time // with any backoff after a failed fire
	TransactionID string    // the txn
	MessageID     string
	Data          json.RawMessage // Get only: the fired message's body, as stored
	Encrypted     bool
	ProducerSub   string
	Attempts      int
	LastError     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Decode unmarshals the fired message's body into v.
func (t *Timer) Decode(v any) error { return json.Unmarshal(t.Data, v) }

// TimerPage is one page of a queue's pending timers, in key order.
type TimerPage struct {
	Timers    []Timer
	Truncated bool   // more follow: ask again with After = NextAfter
	NextAfter string // the last key of this page when Truncated
}

// Apply sends ops as one call (POST /api/v1/timers; gRPC Timers): the ops
// are independent but land in one log entry, and each gets its result, in
// order. A malformed op refuses the whole call (an *Error with
// INVALID_ARGUMENT) and nothing is scheduled or cancelled. A retried
// schedule is safe in the way the addendum §1.8 says: it replaces the
// pending timer, and if the first one fired meanwhile the second fire is
// absorbed by the queue's dedup of the same txn. To make the call itself
// idempotent, send the ops in a transaction with an Idempotency-Key.
func (t *Timers) Apply(ctx context.Context, ops ...TimerOp) ([]TimerResult, error) {
	in, err := timerOpsOf(ops)
	if err != nil || len(in) == 0 {
		return nil, err
	}
	res, err := do(ctx, t.c.retry, func(ctx context.Context) ([]TimerResult, error) { return t.c.t.timers(ctx, in) })
	if err == nil && len(res) != len(in) {
		return res, &Error{Message: fmt.Sprintf("timers answered %d results for %d ops", len(res), len(in))}
	}
	return res, err
}

// Cancel cancels the timer named key on queue (DELETE
// /api/v1/timers/:queue/:key; gRPC CancelTimer), a call the broker refuses
// neither for rate nor by its schedule switch. Nothing pending is a result
// with TimerAbsent. WithTransactionID names a txn to echo then.
func (t *Timers) Cancel(ctx context.Context, queue, key string, opts ...PushOption) (*TimerResult, error) {
	op := CancelTimer(queue, key, opts...)
	if op.err != nil {
		return nil, op.err
	}
	return do(ctx, t.c.retry, func(ctx context.Context) (*TimerResult, error) {
		return t.c.t.cancelTimer(ctx, queue, key, op.op.Txn)
	})
}

// Get peeks at the pending timer named key on queue (GET
// /api/v1/timers/:queue/:key; gRPC GetTimer). Nothing pending is
// Found=false, not an error.
func (t *Timers) Get(ctx context.Context, queue, key string) (*Timer, error) {
	return do(ctx, t.c.retry, func(ctx context.Context) (*Timer, error) { return t.c.t.getTimer(ctx, queue, key) })
}

// List reads a page of queue's pending timers in key order, starting after
// the key after ("" = from the first), at most limit of them (0 = 100; the
// broker clamps at 1000). The timers come without Data.
func (t *Timers) List(ctx context.Context, queue, after string, limit int) (*TimerPage, error) {
	return do(ctx, t.c.retry, func(ctx context.Context) (*TimerPage, error) {
		return t.c.t.listTimers(ctx, queue, after, limit)
	})
}

// Count counts queue's pending timers whose key starts with prefix
// (required: non-empty, at most 128 bytes, taken literally).
func (t *Timers) Count(ctx context.Context, queue, prefix string) (int, error) {
	return do(ctx, t.c.retry, func(ctx context.Context) (int, error) { return t.c.t.countTimers(ctx, queue, prefix) })
}
