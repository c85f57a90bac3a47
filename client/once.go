package queen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// OnceConsumer settles each message's effect at most once, in batches: the
// seed's charge loop (pop, read the marker, commit the effect, the marker
// and the ack together) for N messages at a time, in three requests and two
// log entries per batch instead of per message.
//
// A worker pops up to Batch messages, reads all their markers with one
// getMany, calls the handler for each message not yet marked, and commits
// one transaction: for every message the handler decided, its effect (the
// pushes it asked for) and a required putIfAbsent of its marker; for every
// message, its ack (completed, or failed with the handler's error: it comes
// back after the queue's retryDelay and reaches the DLQ after its
// retryLimit). The effect commits with the marker or not at all, so a
// message delivered twice has its effect committed once.
//
// A transaction is all or nothing, so one lost marker race or one lost
// lease would roll back the whole batch, the effects the handler already
// decided included. The consumer then commits again without calling the
// handler again: a message whose marker another consumer committed
// meanwhile (kv_precondition) keeps only its ack, and messages whose lease
// ran out (rejected_ack) keep their effect and marker without the ack (the
// broker delivers them again, and the next delivery finds the marker).
//
// The handler's effect must be what it pushes in the transaction (a
// ledger entry, an outbox message): an effect outside the broker (a card
// charged through a gateway) is not rolled back with the transaction, so
// it needs the gateway's own idempotency key (the marker's key is a good
// one).
type OnceConsumer struct {
	*Consumer
	oo OnceOptions
}

// OnceOptions shape a OnceConsumer.
type OnceOptions struct {
	ConsumerOptions
	// Namespace is the markers' KV namespace (required).
	Namespace string
	// Key names a message's marker; nil = its TransactionID.
	Key func(m *Message) string
	// TTL is how long a marker lives: longer than any redelivery can come
	// (the queue's retries, a replay). 0 = forever.
	TTL time.Duration
	// MaxCommits bounds the commits of one batch (each lost race or lease
	// costs one more); 0 = 8.
	MaxCommits int
	// OnSettled is told how each message ended (nil: not told).
	OnSettled func(m *Message, s OnceSettled)
}

// OnceSettled is how one message of a batch ended.
type OnceSettled struct {
	// Outcome: OnceCommitted (its effect and marker committed here),
	// OnceMarked (its marker was there: only acked), OnceFailed (the
	// handler failed it), OnceUncommitted (no commit got through: nothing
	// of it was written, the broker delivers it again).
	Outcome OnceOutcome
	// Acked: its ack committed (false when its lease ran out first).
	Acked bool
	// Marker is the marker's value (OnceCommitted, OnceMarked).
	Marker json.RawMessage
	Err    error // OnceFailed: the handler's error; OnceUncommitted: why
}

// OnceOutcome is how a message of a batch ended.
type OnceOutcome int

// Outcomes.
const (
	OnceCommitted OnceOutcome = iota + 1
	OnceMarked
	OnceFailed
	OnceUncommitted
)

func (o OnceOutcome) String() string {
	switch o {
	case OnceCommitted:
		return "committed"
	case OnceMarked:
		return "marked before"
	case OnceFailed:
		return "failed"
	case OnceUncommitted:
		return "uncommitted"
	}
	return fmt.Sprintf("OnceOutcome(%d)", int(o))
}

// Effect is what a OnceHandler decides for one message: its marker's value
// and the pushes that commit with it.
type Effect struct {
	marker any
	pushes []txnOp
	err    error
}

// Mark sets the marker's value (default true), e.g. the charge id.
func (e *Effect) Mark(value any) { e.marker = value }

// Push appends payload to queue with the marker, in the same entry.
func (e *Effect) Push(queue string, payload any, opts ...PushOption) {
	op, err := pushOp(queue, payload, opts)
	if err != nil {
		e.err = errors.Join(e.err, err)
		return
	}
	e.pushes = append(e.pushes, op)
}

// OnceHandler decides one message whose marker is absent. Returning an
// error fails the message and commits nothing of e; returning ErrAbandon
// (or an error wrapping it) drops the whole batch uncommitted.
type OnceHandler func(ctx context.Context, m *Message, e *Effect) error

// ErrAbandon, returned by a OnceHandler, drops its whole batch: nothing is
// committed, nothing is acked, and the broker delivers the messages again
// when their lease runs out (what a worker that dies does).
var ErrAbandon = errors.New("queen: batch abandoned")

// OnceConsumer makes a consumer that settles each message's effect once;
// Run starts it.
func (q *Queue) OnceConsumer(o OnceOptions) *OnceConsumer {
	if o.Key == nil {
		o.Key = func(m *Message) string { return m.TransactionID }
	}
	if o.MaxCommits <= 0 {
		o.MaxCommits = 8
	}
	return &OnceConsumer{Consumer: q.Consumer(o.ConsumerOptions), oo: o}
}

// Run settles batches until Stop or until ctx ends, as Consumer.Run does.
func (c *OnceConsumer) Run(ctx context.Context, h OnceHandler) error {
	if c.oo.Namespace == "" {
		return errors.New("queen: OnceOptions.Namespace is required")
	}
	return c.run(ctx, func(ctx context.Context, msgs []*Message) { c.settleBatch(ctx, h, msgs) })
}

// onceItem is one message of a batch on its way to a commit.
type onceItem struct {
	m        *Message
	key      string
	effect   *Effect // decided by the handler (nil: marked before, or failed)
	marker   json.RawMessage
	failed   error
	marked   bool // its marker is there (before the handler, or committed by another meanwhile)
	leaseOut bool // its lease ran out: commit its effect without its ack
}

func (c *OnceConsumer) settleBatch(ctx context.Context, h OnceHandler, msgs []*Message) {
	stopRenew := c.renew(ctx, msgs[0])
	defer stopRenew()
	items := make([]*onceItem, len(msgs))
	for i, m := range msgs {
		items[i] = &onceItem{m: m, key: c.oo.Key(m)}
	}
	if err := c.readMarkers(ctx, items); err != nil {
		c.report(err)
		c.uncommitted(items, err)
		return
	}
	for _, it := range items {
		if it.marked || ctx.Err() != nil {
			continue
		}
		e := &Effect{}
		err := h(ctx, it.m, e)
		if err == nil {
			err = e.err
		}
		if errors.Is(err, ErrAbandon) {
			c.uncommitted(items, err)
			return
		}
		if err != nil {
			it.failed = err
			continue
		}
		v := e.marker
		if v == nil {
			v = true
		}
		if it.marker, err = json.Marshal(v); err != nil {
			it.failed = fmt.Errorf("queen: marker of %s: %w", it.key, err)
			continue
		}
		it.effect = e
	}
	if ctx.Err() != nil {
		c.uncommitted(items, ctx.Err())
		return
	}
	c.commit(ctx, items)
}

// readMarkers marks the items whose marker is there, in one getMany per
// call's read limit.
func (c *OnceConsumer) readMarkers(ctx context.Context, items []*onceItem) error {
	byKey := map[string][]*onceItem{}
	var keys []string
	for _, it := range items {
		if it.marked {
			continue
		}
		if _, seen := byKey[it.key]; !seen {
			keys = append(keys, it.key)
		}
		byKey[it.key] = append(byKey[it.key], it)
	}
	for len(keys) > 0 {
		rows, err := c.q.c.KV().GetMany(ctx, c.oo.Namespace, keys...)
		if err != nil {
			return err
		}
		for _, r := range rows.Rows {
			for _, it := range byKey[r.Key] {
				it.marked, it.marker, it.effect = true, r.Value, nil
			}
			delete(byKey, r.Key)
		}
		for _, k := range rows.Missing {
			delete(byKey, k)
		}
		if !rows.Truncated {
			return nil
		}
		keys = keys[:0]
		for k := range byKey {
			keys = append(keys, k)
		}
	}
	return nil
}

// commit sends the batch's transaction, and again after a lost race or a
// lost lease, without the part that lost, until it commits.
func (c *OnceConsumer) commit(ctx context.Context, items []*onceItem) {
	var last error
	for attempt := range c.oo.MaxCommits {
		// A retry of a commit whose answer was lost is answered from the
		// broker's record of this key; each attempt commits something else.
		tx := c.q.c.Transaction().IdempotencyKey(fmt.Sprintf("once/%s/%d", items[0].m.LeaseID, attempt))
		var acked []*onceItem // by their op index: acks and pushes in the order added
		var ops []*onceItem
		for _, it := range items {
			if !it.leaseOut {
				if it.failed != nil {
					tx.AckStatus(it.m, Failed, it.failed.Error())
				} else {
					tx.Ack(it.m)
				}
				acked = append(acked, it)
				ops = append(ops, it)
			}
			if it.effect != nil && !it.marked {
				tx.KV().PutIfAbsent(c.oo.Namespace, it.key, it.marker, c.oo.TTL, true)
				for _, p := range it.effect.pushes {
					tx.req.ops = append(tx.req.ops, p)
					ops = append(ops, it)
				}
			}
		}
		if len(tx.req.ops) == 0 && len(tx.req.kv) == 0 {
			c.done(items)
			return
		}
		res, err := tx.Commit(ctx)
		var rejected *RejectedAckError
		switch {
		case err == nil && res.Committed:
			c.done(items)
			return
		case err == nil && res.Precondition != nil:
			// A marker another delivery committed meanwhile: re-read them
			// all, so that one commit more is enough for every lost race.
			if rerr := c.readMarkers(ctx, items); rerr != nil {
				last = rerr
				continue
			}
			last = errors.New("queen: a marker was committed by another delivery meanwhile")
		case errors.As(err, &rejected):
			// A lease ran out: its messages keep their effect and marker,
			// and lose their ack (the broker delivers them again).
			lease := ""
			if rejected.Index >= 0 && rejected.Index < len(ops) {
				lease = ops[rejected.Index].m.LeaseID
			}
			lost := false
			for _, it := range acked {
				if it.m.LeaseID == lease || lease == "" {
					it.leaseOut, lost = true, true
				}
			}
			if !lost {
				c.uncommitted(items, err)
				return
			}
			last = err
		default:
			c.report(err)
			c.uncommitted(items, err)
			return
		}
	}
	c.uncommitted(items, fmt.Errorf("queen: no commit of the batch after %d tries: %w", c.oo.MaxCommits, last))
}

func (c *OnceConsumer) done(items []*onceItem) {
	for _, it := range items {
		s := OnceSettled{Acked: !it.leaseOut, Marker: it.marker}
		switch {
		case it.failed != nil:
			s.Outcome, s.Err = OnceFailed, it.failed
		case it.marked:
			s.Outcome = OnceMarked
		default:
			s.Outcome = OnceCommitted
		}
		c.tell(it.m, s)
	}
}

func (c *OnceConsumer) uncommitted(items []*onceItem, err error) {
	for _, it := range items {
		c.tell(it.m, OnceSettled{Outcome: OnceUncommitted, Err: err})
	}
}

func (c *OnceConsumer) tell(m *Message, s OnceSettled) {
	if c.oo.OnSettled != nil {
		c.oo.OnSettled(m, s)
	}
}
