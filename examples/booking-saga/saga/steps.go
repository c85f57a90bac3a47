package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// isoMicros is how the broker writes its times (deliverAt, createdAt).
const isoMicros = "2006-01-02T15:04:05.000000Z"

// first returns the first result of a type in a committed transaction.
func first(res *queen.TxResult, typ string) (queen.TxItem, bool) {
	for _, r := range res.Results {
		if r.Type == typ {
			return r, true
		}
	}
	return queen.TxItem{}, false
}

// reserve is the bookings worker: one transaction holds the state, the
// release timer, the payment request and the ack.
func (s *saga) reserve(ctx context.Context, m *queen.Message) error {
	var sub submission
	if err := m.Decode(&sub); err != nil {
		return fmt.Errorf("submission %s: %v", m.TransactionID, err)
	}
	b, err := s.booking(sub.BookingID)
	if err != nil {
		return err
	}
	releaseTxn := "release-" + b.ID + "-" + m.TransactionID
	payload, _ := json.Marshal(releasePayload{BookingID: b.ID, Submission: m.TransactionID, Reason: "payment window expired"})
	state := bookingState{State: StateReserved, BookingID: b.ID, Seat: sub.Seat, Submission: m.TransactionID}
	res, err := s.tx("reserve", m).
		// The submission is in the id: a second submission would push a
		// request of its own, which only the gate stops.
		Push(s.rep.PaymentsQueue, paymentRequest{BookingID: b.ID, Submission: m.TransactionID, Cents: sub.Cents},
			queen.WithPartition(b.ID), queen.WithTransactionID("payment-"+b.ID+"-"+m.TransactionID)).
		Ack(m).
		KV().PutIfAbsent(s.ns, b.StateKey, state, s.cfg.StateTTL, true).
		Timers(queen.ScheduleTimer(s.rep.ReleasesQueue, b.TimerKey, s.cfg.ReleaseDelay, json.RawMessage(payload),
			queen.WithTransactionID(releaseTxn))).
		Commit(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("reserve of %s (%s) rolled back: %w", b.ID, m.TransactionID, err)
	case res.Precondition != nil:
		return s.duplicate(ctx, b, m, res.Precondition)
	}
	kv, okKV := first(res, "kv")
	tm, okT := first(res, "timer")
	push, okP := first(res, "push")
	if !okKV || !okT || !okP || !kv.KV.Applied || push.MessageID == "" {
		return fmt.Errorf("reserve of %s committed with unexpected results: %+v", b.ID, res.Results)
	}
	b.Winners++
	b.Submission, b.ReserveVersion = m.TransactionID, int64(kv.KV.Version)
	b.TimerStatus, b.TimerTxn, b.TimerMessageID = string(tm.Timer.Status), tm.Timer.TransactionID, tm.Timer.MessageID
	b.DeliverAt, b.TimerPayload = tm.Timer.DeliverAt, payload
	s.logf("  %s: reserved by %s (state v%d, release timer %s, due %s, payment requested, submission acked)",
		b.ID, m.TransactionID, kv.KV.Version, tm.Timer.Status, tm.Timer.DeliverAt.UTC().Format(isoMicros))
	return nil
}

// duplicate handles a submission that lost the gate: it is acked on its own,
// and the broker is asked what the lost commit left behind.
func (s *saga) duplicate(ctx context.Context, b *Booking, m *queen.Message, gate *queen.Precondition) error {
	d := &Duplicate{BookingID: b.ID, Submission: m.TransactionID, Reason: "kv_precondition", KVReason: gate.Reason,
		WinnerVersion: int64(gate.Version)}
	var winner bookingState
	_ = json.Unmarshal(gate.Value, &winner)
	d.WinnerSubmission = winner.Submission
	if winner.Submission == m.TransactionID {
		// This very submission reserved the booking under an earlier lease
		// whose answer never arrived (every retry of that commit failed
		// until its lease ran out). The run cannot see that reserve's
		// timer result, so it stops here rather than guess.
		return fmt.Errorf("%s: the gate names this submission itself (%s): an earlier delivery's reserve landed unseen", b.ID, m.TransactionID)
	}
	if err := s.ackAlone(ctx, "ack-duplicate", m); err != nil {
		return err
	}
	d.Acked = true
	st, err := s.c.KV().Get(ctx, s.ns, b.StateKey)
	if err != nil {
		return err
	}
	var now bookingState
	_ = json.Unmarshal(st.Value, &now)
	d.StateVersionAfter, d.StateSubmissionAfter = int64(st.Version), now.Submission
	p, err := s.c.Timers().Get(ctx, s.rep.ReleasesQueue, b.TimerKey)
	if err != nil {
		return err
	}
	d.TimerFound, d.TimerTxnAfter, d.TimerMessageIDAfter = p.Found, p.TransactionID, p.MessageID
	if d.TimerCount, err = s.c.Timers().Count(ctx, s.rep.ReleasesQueue, b.TimerKey); err != nil {
		return err
	}
	s.rep.Duplicates = append(s.rep.Duplicates, d)
	timer := "no timer pending"
	if p.Found {
		timer = "timer still " + p.TransactionID
	}
	s.logf("  %s: duplicate %s lost the gate (%s: %s, winner %s v%d), acked on its own; state v%d, %s, %d timer(s) under its key",
		b.ID, m.TransactionID, d.Reason, d.KVReason, winner.Submission, gate.Version, st.Version, timer, d.TimerCount)
	return nil
}

// payments runs the payment worker. The payment requests are in one
// partition per booking, so a late payment holding its lease does not hold
// up the others; it runs in a goroutine of its own.
func (s *saga) payments(ctx context.Context) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lateErr error
	err := s.consume(ctx, s.rep.PaymentsQueue, "payer", s.cfg.Bookings, func(ctx context.Context, m *queen.Message) error {
		var req paymentRequest
		if err := m.Decode(&req); err != nil {
			return fmt.Errorf("payment request %s: %v", m.TransactionID, err)
		}
		b, err := s.booking(req.BookingID)
		if err != nil {
			return err
		}
		b.PaymentRequests++
		b.PaymentSubmission = req.Submission
		switch b.Plan {
		case PlanDecline:
			if err := s.ackAlone(ctx, "decline", m); err != nil {
				return err
			}
			s.logf("  %s: card declined; the payment request is acked, the booking stays reserved until its timer fires", b.ID)
			return nil
		case PlanLate:
			s.logf("  %s: the card network is slow; this payment completes only after the release timer fired", b.ID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.latePayment(ctx, b, m)
				if err != nil {
					mu.Lock()
					lateErr = errors.Join(lateErr, err)
					mu.Unlock()
				}
			}()
			return nil
		}
		return s.confirm(ctx, b, m)
	})
	wg.Wait()
	return errors.Join(err, lateErr)
}

// latePayment waits until the booking's release timer has fired (its peek
// says found:false), then confirms.
func (s *saga) latePayment(ctx context.Context, b *Booking, m *queen.Message) error {
	for {
		p, err := s.c.Timers().Get(ctx, s.rep.ReleasesQueue, b.TimerKey)
		if err != nil {
			return err
		}
		if !p.Found {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the release timer due %s never fired: %w", b.ID, b.DeliverAt.Format(time.RFC3339Nano), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return s.confirm(ctx, b, m)
}

// confirm reads the booking's state and, if it is still reserved, commits
// the confirmed state (expect = the version read), the cancel of the
// release timer and the ack of the payment request.
func (s *saga) confirm(ctx context.Context, b *Booking, m *queen.Message) error {
	st, cur, err := s.state(ctx, b)
	if err != nil {
		return err
	}
	if cur.State != StateReserved {
		b.PaidTooLate = true
		s.logf("  %s: the payment found the booking %q; it would be refunded", b.ID, cur.State)
		return s.ackAlone(ctx, "refund", m)
	}
	b.ConfirmExpect = int64(st.Version)
	confirmed := bookingState{State: StateConfirmed, BookingID: b.ID, Seat: cur.Seat, Submission: cur.Submission, Payment: m.TransactionID}
	res, err := s.tx("confirm", m).
		Ack(m).
		KV().PutIfVersion(s.ns, b.StateKey, confirmed, s.cfg.StateTTL, st.Version, true).
		Timers(queen.CancelTimer(s.rep.ReleasesQueue, b.TimerKey, queen.WithTransactionID(b.TimerTxn))).
		Commit(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("confirm of %s rolled back: %w", b.ID, err)
	case res.Precondition != nil:
		// The release handler moved the state between the read and the
		// commit: the payment came too late.
		b.PaidTooLate = true
		s.logf("  %s: the confirm lost its gate (%s); it would be refunded", b.ID, res.Precondition.Reason)
		return s.ackAlone(ctx, "refund", m)
	}
	kv, okKV := first(res, "kv")
	tm, okT := first(res, "timer")
	if !okKV || !okT || !kv.KV.Applied {
		return fmt.Errorf("confirm of %s committed with unexpected results: %+v", b.ID, res.Results)
	}
	b.Confirmed, b.ConfirmVersion, b.CancelStatus = true, int64(kv.KV.Version), string(tm.Timer.Status)
	b.CancelTxn = tm.Timer.TransactionID
	s.logf("  %s: paid; confirmed (expect v%d, now v%d), release timer %s, payment request acked", b.ID, st.Version, kv.KV.Version, tm.Timer.Status)
	return nil
}

// state reads a booking's state; a missing one is the zero state.
func (s *saga) state(ctx context.Context, b *Booking) (*queen.KVEntry, bookingState, error) {
	var cur bookingState
	st, err := s.c.KV().Get(ctx, s.ns, b.StateKey)
	if err != nil {
		return nil, cur, err
	}
	if st.Found {
		_ = st.Decode(&cur)
	}
	return st, cur, nil
}

// release is the handler of the fired release messages. It reads the state
// before acting: only a booking still reserved is released (put with
// expect + ack in one transaction); a confirmed one just has its message
// acked.
func (s *saga) release(ctx context.Context, m *queen.Message) error {
	var p releasePayload
	if err := m.Decode(&p); err != nil {
		return fmt.Errorf("release message %s: %v", m.TransactionID, err)
	}
	b, err := s.booking(p.BookingID)
	if err != nil {
		return err
	}
	created := m.CreatedAt
	b.FiredMessages++
	b.FiredAt = created
	s.rep.Fired = append(s.rep.Fired, FiredMessage{BookingID: b.ID, MessageID: m.ID, TransactionID: m.TransactionID, CreatedAt: created, Data: m.Data})
	arrived := fmt.Sprintf("appended %s after its deliverAt", fmtMs(created.Sub(b.DeliverAt)))
	for attempt := 1; attempt <= 5; attempt++ {
		st, cur, err := s.state(ctx, b)
		if err != nil {
			return err
		}
		switch cur.State {
		case StateReserved:
			released := bookingState{State: StateReleased, BookingID: b.ID, Seat: cur.Seat, Submission: cur.Submission,
				Reason: "no payment by " + b.DeliverAt.Format(time.RFC3339Nano)}
			res, err := s.tx("release-"+strconv.Itoa(attempt), m).
				Ack(m).
				KV().PutIfVersion(s.ns, b.StateKey, released, s.cfg.StateTTL, st.Version, true).
				Commit(ctx)
			switch {
			case err != nil:
				return fmt.Errorf("release of %s rolled back: %w", b.ID, err)
			case res.Precondition != nil:
				continue // the state moved since the read: read it again
			}
			b.Released++
			s.logf("  %s: release message %s; state was reserved v%d: released, message acked", b.ID, arrived, st.Version)
			return nil
		case StateConfirmed:
			b.SkippedConfirmed++
			s.logf("  %s: release message %s; state is confirmed v%d: the payment won, message only acked", b.ID, arrived, st.Version)
			return s.ackAlone(ctx, "release-skip", m)
		case StateReleased:
			b.SkippedReleased++
			s.logf("  %s: release message %s; already released, message only acked", b.ID, arrived)
			return s.ackAlone(ctx, "release-skip", m)
		default:
			return fmt.Errorf("release of %s: unexpected state %q (found=%v)", b.ID, cur.State, st.Found)
		}
	}
	return fmt.Errorf("release of %s: the state kept moving under 5 attempts", b.ID)
}
