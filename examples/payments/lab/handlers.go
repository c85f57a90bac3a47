package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// post appends a charge to the workers' ledger (modes 1 and 2).
func (r *run) post(p payment, attempt int) {
	r.mu.Lock()
	r.ledger = append(r.ledger, charge{PaymentID: p.PaymentID, ChargeID: fmt.Sprintf("ch_%s_%d", p.PaymentID, attempt), Amount: p.Amount})
	r.mu.Unlock()
}

// Mode 1: charge, then ack. A crash in between leaves the message unacked;
// its lease runs out and it is delivered, and charged, again.
func (r *run) handleAtLeastOnce(ctx context.Context, m *queen.Message, p payment, attempt int) error {
	r.post(p, attempt)
	if crash, _ := crashes(p.PaymentID, attempt, r.cfg.CrashPercent); crash {
		r.count(func(s *Result) { s.Crashes++ })
		return nil // the worker dies: no ack, the lease is abandoned
	}
	ok, err := r.ackSettle(ctx, m, p.PaymentID)
	if err == nil && !ok {
		// The lease ran out first: the message comes back and is charged
		// again, which is exactly this mode's flaw.
		r.count(func(s *Result) { s.AckRefused++ })
	}
	return err
}

// Mode 2: ack, then charge. A crash in between loses the payment: the
// broker was told it is done and never brings it back.
func (r *run) handleAckFirst(ctx context.Context, m *queen.Message, p payment, attempt int) error {
	ok, err := r.ackSettle(ctx, m, p.PaymentID)
	if err != nil {
		return err
	}
	if !ok {
		r.count(func(s *Result) { s.AckRefused++ })
		return nil // not acked, not charged: it comes back
	}
	if crash, _ := crashes(p.PaymentID, attempt, r.cfg.CrashPercent); crash {
		r.count(func(s *Result) { s.Crashes++ })
		return nil // the worker dies after the ack: the charge never happens
	}
	r.post(p, attempt)
	return nil
}

// Mode 3: the marker, the ack and the charge in ONE transaction.
//
// replay is true when a restarted worker runs the handler again for a
// delivery whose commit reply it lost: it cannot know whether the commit
// landed, so it asks the marker.
func (r *run) handleMarker(ctx context.Context, m *queen.Message, p payment, attempt int, replay bool) error {
	// 1. Was this payment charged already? `found` is its own field
	//    because null is a value one can store.
	mk, err := r.c.KV().Get(ctx, r.ns, markerKey(p.PaymentID))
	if err != nil {
		return err
	}
	if mk.Found {
		// Nothing to charge, but the message still has to leave the
		// group's cursor. After a lost reply the commit already acked it,
		// and the broker answers the repeated ack as a no-op success.
		r.count(func(s *Result) { s.MarkerHits++ })
		if ok, err := r.ackSettle(ctx, m, p.PaymentID); err != nil || ok {
			return err
		}
		r.count(func(s *Result) { s.AckRefused++ })
		return nil
	}

	crash, afterCommit := crashes(p.PaymentID, attempt, r.cfg.CrashPercent)
	crash = crash && !replay // the crash plan is per delivery, not per replay
	if crash && !afterCommit {
		// 2. Dies before the commit: nothing was written, the lease runs
		//    out and the payment comes back.
		r.count(func(s *Result) { s.Crashes++; s.CrashesBeforeCommit++ })
		return nil
	}

	// 3. The commit. The charge is a push of the ledger entry, so the
	//    effect itself is inside the transaction. Its transactionId names
	//    this delivery, so the push's own dedup can never hide a second
	//    charge from another delivery: only the marker stands in the way.
	chargeID := fmt.Sprintf("ch_%s_%d", p.PaymentID, attempt)
	commit := func(c *queen.Client) *queen.Tx {
		return c.Transaction().
			Ack(m).
			Push(r.led, charge{PaymentID: p.PaymentID, ChargeID: chargeID, Amount: p.Amount},
				queen.WithPartition("ledger"), queen.WithTransactionID("ledger-"+chargeID)).
			// The kv op goes to the ROOT kv array, beside operations.
			// required turns the putIfAbsent into a gate: if the marker
			// exists, the whole transaction rolls back, ack and charge
			// included.
			KV().PutIfAbsent(r.ns, markerKey(p.PaymentID), marker{ChargeID: chargeID, Amount: p.Amount}, time.Hour, true)
	}

	if crash && afterCommit {
		// Dies right after sending the commit: the broker answers, nobody
		// reads it. It is sent once, with no retry, and whatever came back
		// (a verdict, an error, nothing) is dropped unread. The restarted
		// worker replays the delivery from the top.
		r.mu.Lock()
		r.res.Crashes++
		r.res.CrashesAfterCommit++
		r.unsure[p.PaymentID] = true
		r.mu.Unlock()
		_, _ = commit(r.b.crash).Commit(ctx)
		r.count(func(s *Result) { s.Replays++ })
		return r.handleMarker(ctx, m, p, attempt, true)
	}

	res, err := commit(r.c).Commit(ctx)
	var rejected *queen.RejectedAckError
	var dup *queen.DuplicateError
	switch {
	case errors.As(err, &rejected), errors.As(err, &dup):
		// rejected_ack: the lease ran out before the commit (the message
		// comes back under a new lease), or a retried commit finds its first
		// send already applied. duplicate: likewise, the ledger entry of
		// this very delivery is already stored. Either way nothing was
		// written now; the supervisor settles the payment if its marker
		// exists, and otherwise the redelivery will.
		r.mu.Lock()
		r.res.RejectedAcks++
		r.unsure[p.PaymentID] = true
		r.mu.Unlock()
	case err != nil:
		return err // *queen.TxError: any other refusal
	case res.Committed:
		r.settle(p.PaymentID)
	case res.Precondition != nil:
		// Another delivery of this payment committed first. Nothing of this
		// transaction was written; the message is acked on its own.
		r.count(func(s *Result) { s.KVPrecondition++ })
		_, err := r.ackSettle(ctx, m, p.PaymentID)
		return err
	}
	return nil
}

// ackSettle acknowledges one message under its lease and, if the broker
// took it, settles the payment. A refusal ("Invalid or expired lease") is
// ok=false, not an error.
func (r *run) ackSettle(ctx context.Context, m *queen.Message, id string) (ok bool, err error) {
	err = r.c.Ack(ctx, m)
	var refused *queen.AckError
	if errors.As(err, &refused) {
		return false, nil
	}
	if err == nil {
		r.settle(id)
	}
	return err == nil, err
}
