package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"google.golang.org/grpc/codes"

	queen "github.com/queen-node/queen-node/client"
)

// verify reads the final state back and runs the checks.
func (s *saga) verify(ctx context.Context) error {
	for _, b := range s.rep.Bookings {
		st, cur, err := s.state(ctx, b)
		if err != nil {
			return err
		}
		b.FinalState, b.FinalVersion = cur.State, int64(st.Version)
		p, err := s.c.Timers().Get(ctx, s.rep.ReleasesQueue, b.TimerKey)
		if err != nil {
			return err
		}
		b.PendingTimer = p.Found
	}
	var err error
	if s.rep.PendingTimers, err = s.c.Timers().Count(ctx, s.rep.ReleasesQueue, "booking/"); err != nil {
		return err
	}
	if s.rep.PaymentsTotal, err = s.queueTotal(ctx, s.rep.PaymentsQueue); err != nil {
		return err
	}
	if s.rep.ReleasesTotal, err = s.queueTotal(ctx, s.rep.ReleasesQueue); err != nil {
		return err
	}

	bs := s.rep.Bookings
	byPlan := func(plans ...string) []*Booking {
		var out []*Booking
		for _, b := range bs {
			for _, p := range plans {
				if b.Plan == p {
					out = append(out, b)
				}
			}
		}
		return out
	}
	// all runs pred over bookings and reports the first that fails it.
	all := func(list []*Booking, pred func(*Booking) string) (bool, string) {
		for _, b := range list {
			if why := pred(b); why != "" {
				return false, b.ID + ": " + why
			}
		}
		return true, ""
	}

	ok, why := all(bs, func(b *Booking) string {
		switch {
		case b.Winners != 1:
			return fmt.Sprintf("%d reserves committed", b.Winners)
		case b.TimerStatus != "scheduled":
			return fmt.Sprintf("timer status %q, want scheduled", b.TimerStatus)
		case b.TimerTxn != "release-"+b.ID+"-"+b.Submission || b.TimerMessageID == "":
			return fmt.Sprintf("timer txn %q message %q", b.TimerTxn, b.TimerMessageID)
		}
		return ""
	})
	s.check(ok, plural(len(bs), "booking")+" reserved once each, by one transaction: state, release timer (scheduled), payment request, ack", why)

	ok, why = len(s.rep.Duplicates) == s.cfg.Duplicates, fmt.Sprintf("%d duplicates lost the gate, want %d", len(s.rep.Duplicates), s.cfg.Duplicates)
	for _, d := range s.rep.Duplicates {
		if d.Reason != "kv_precondition" || d.KVReason != "exists" || !d.Acked {
			ok, why = false, fmt.Sprintf("%s (%s): reason %q kvReason %q acked %v", d.BookingID, d.Submission, d.Reason, d.KVReason, d.Acked)
		}
	}
	s.check(ok, plural(len(s.rep.Duplicates), "duplicate submission")+" lost the gate (kv_precondition, exists), each then acked on its own", why)

	ok, why = true, ""
	for _, d := range s.rep.Duplicates {
		b := s.by[d.BookingID]
		switch {
		case d.WinnerSubmission != b.Submission || d.WinnerVersion != b.ReserveVersion:
			ok, why = false, fmt.Sprintf("%s: the gate named %s v%d, the winner was %s v%d", b.ID, d.WinnerSubmission, d.WinnerVersion, b.Submission, b.ReserveVersion)
		case d.StateVersionAfter != b.ReserveVersion || d.StateSubmissionAfter != b.Submission:
			ok, why = false, fmt.Sprintf("%s: after the duplicate the state was v%d by %s, want v%d by %s", b.ID, d.StateVersionAfter, d.StateSubmissionAfter, b.ReserveVersion, b.Submission)
		case d.TimerCount > 1 || (d.TimerFound && (d.TimerTxnAfter != b.TimerTxn || d.TimerMessageIDAfter != b.TimerMessageID)):
			ok, why = false, fmt.Sprintf("%s: after the duplicate %d timer(s), txn %q message %q; the winner's are %q %q", b.ID, d.TimerCount, d.TimerTxnAfter, d.TimerMessageIDAfter, b.TimerTxn, b.TimerMessageID)
		case b.PaymentRequests != 1 || b.PaymentSubmission != b.Submission:
			ok, why = false, fmt.Sprintf("%s: %d payment requests, naming %s; want one, naming %s", b.ID, b.PaymentRequests, b.PaymentSubmission, b.Submission)
		case b.FiredMessages > 1:
			ok, why = false, fmt.Sprintf("%s: %d release messages", b.ID, b.FiredMessages)
		}
	}
	if s.rep.PaymentsTotal != len(bs) {
		ok, why = false, fmt.Sprintf("the payments queue holds %d requests for %d bookings", s.rep.PaymentsTotal, len(bs))
	}
	s.check(ok, "the duplicates wrote nothing: state untouched, the winner's timer only, no second payment request", why)

	ok, why = all(bs, func(b *Booking) string {
		if b.PaymentRequests != 1 || b.PaymentSubmission != b.Submission {
			return fmt.Sprintf("%d payment requests naming %s; want one naming %s", b.PaymentRequests, b.PaymentSubmission, b.Submission)
		}
		return ""
	})
	s.check(ok, fmt.Sprintf("each booking got exactly one payment request, from the submission that won (%d in the payments queue)", s.rep.PaymentsTotal), why)

	confirmed := byPlan(PlanPay, PlanLate)
	ok, why = all(confirmed, func(b *Booking) string {
		switch {
		case !b.Confirmed:
			return fmt.Sprintf("not confirmed (paid too late: %v)", b.PaidTooLate)
		case b.ConfirmExpect != b.ReserveVersion:
			return fmt.Sprintf("the confirm expected v%d, the reserve wrote v%d", b.ConfirmExpect, b.ReserveVersion)
		}
		return ""
	})
	s.check(ok, plural(len(confirmed), "paid booking")+" confirmed, each with expect = the version its reserve wrote", why)

	onTime := byPlan(PlanPay)
	ok, why = all(onTime, func(b *Booking) string {
		if b.CancelStatus != "cancelled" || b.CancelTxn != b.TimerTxn {
			return fmt.Sprintf("cancel status %q txn %q, want cancelled %q", b.CancelStatus, b.CancelTxn, b.TimerTxn)
		}
		return ""
	})
	s.check(ok, fmt.Sprintf("%s cancelled the release timer (cancelled, with its txn)", plural(len(onTime), "on-time confirm")), why)

	if late := byPlan(PlanLate); len(late) > 0 {
		ok, why = all(late, func(b *Booking) string {
			switch {
			case b.CancelStatus != "absent":
				return fmt.Sprintf("cancel status %q, want absent (the timer had fired)", b.CancelStatus)
			case b.FiredMessages != 1 || b.SkippedConfirmed != 1 || b.Released != 0:
				return fmt.Sprintf("%d release messages, %d found confirmed, %d releases; want 1, 1, 0", b.FiredMessages, b.SkippedConfirmed, b.Released)
			}
			return ""
		})
		s.check(ok, fmt.Sprintf("%s found the timer gone (absent); the release handler then found confirmed and only acked", plural(len(late), "late confirm")), why)
	}

	ok, why = all(confirmed, func(b *Booking) string {
		switch {
		case b.FinalState != StateConfirmed || b.FinalVersion != b.ConfirmVersion:
			return fmt.Sprintf("final state %q v%d, want confirmed v%d", b.FinalState, b.FinalVersion, b.ConfirmVersion)
		case b.PendingTimer:
			return "a release timer is still pending"
		case b.Released != 0:
			return fmt.Sprintf("released %d times", b.Released)
		case b.Plan == PlanPay && b.FiredMessages != 0:
			return fmt.Sprintf("%d release messages fired for a cancelled timer", b.FiredMessages)
		}
		return ""
	})
	s.check(ok, plural(len(confirmed), "confirmed booking")+": no pending timer, never released", why)

	declined := byPlan(PlanDecline)
	ok, why = all(declined, func(b *Booking) string {
		switch {
		case b.FinalState != StateReleased:
			return fmt.Sprintf("final state %q, want released", b.FinalState)
		case b.Released != 1 || b.FiredMessages != 1:
			return fmt.Sprintf("released %d times from %d release messages, want 1 and 1", b.Released, b.FiredMessages)
		case b.PendingTimer:
			return "a release timer is still pending"
		}
		return ""
	})
	s.check(ok, plural(len(declined), "unconfirmed booking")+" released exactly once each, by its own timer", why)

	ok, why = true, ""
	for _, f := range s.rep.Fired {
		b := s.by[f.BookingID]
		var got, want any
		_ = json.Unmarshal(f.Data, &got)
		_ = json.Unmarshal(b.TimerPayload, &want)
		switch {
		case f.MessageID != b.TimerMessageID:
			ok, why = false, fmt.Sprintf("%s: fired message id %s, the schedule minted %s", b.ID, f.MessageID, b.TimerMessageID)
		case f.TransactionID != b.TimerTxn:
			ok, why = false, fmt.Sprintf("%s: fired transactionId %q, the timer's txn is %q", b.ID, f.TransactionID, b.TimerTxn)
		case !reflect.DeepEqual(got, want):
			ok, why = false, fmt.Sprintf("%s: fired data %s, scheduled %s", b.ID, f.Data, b.TimerPayload)
		}
	}
	s.check(ok, plural(len(s.rep.Fired), "fired release message")+": the scheduled ones (messageId, transactionId = txn, data = payload)", why)

	ok, why = true, ""
	for _, f := range s.rep.Fired {
		b := s.by[f.BookingID]
		late := f.CreatedAt.Sub(b.DeliverAt)
		if late < 0 {
			ok, why = false, fmt.Sprintf("%s: appended at %s, %s before its deliverAt %s", b.ID,
				f.CreatedAt.Format(time.RFC3339Nano), fmtMs(-late), b.DeliverAt.Format(time.RFC3339Nano))
		}
		s.rep.MaxLateness = max(s.rep.MaxLateness, late)
	}
	s.check(ok, fmt.Sprintf("no release fired before its deliverAt (latest %s after)", fmtMs(s.rep.MaxLateness)), why)

	wantFired := len(byPlan(PlanLate, PlanDecline))
	s.check(s.rep.PendingTimers == 0 && s.rep.ReleasesTotal == wantFired && len(s.rep.Fired) == wantFired,
		fmt.Sprintf("no timer is left pending; the releases queue holds exactly the %d fired messages", wantFired),
		fmt.Sprintf("%d timers pending, %d messages in the releases queue, %d received", s.rep.PendingTimers, s.rep.ReleasesTotal, len(s.rep.Fired)))
	return nil
}

// queueTotal is the number of messages stored in a queue, 0 for a queue
// that does not exist. The queue detail is the HTTP API's (Queue.Stats;
// the saga's client is an HTTP one).
func (s *saga) queueTotal(ctx context.Context, queue string) (int, error) {
	st, err := s.c.Queue(queue).Stats(ctx)
	switch {
	case queen.Code(err) == codes.NotFound:
		return 0, nil
	case err != nil:
		return 0, err
	}
	return int(st.Total), nil
}

// cleanup removes what the run created: timers still pending (a failed
// run), the booking states and the three queues.
func (s *saga) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var errs []error
	keys := make([]string, len(s.rep.Bookings))
	for i, b := range s.rep.Bookings {
		keys[i] = b.StateKey
		if b.Submission != "" && !b.Confirmed && b.Released == 0 {
			_, err := s.c.Timers().Cancel(ctx, s.rep.ReleasesQueue, b.TimerKey)
			errs = append(errs, err)
		}
	}
	_, err := s.c.KV().DeleteMany(ctx, s.ns, keys...)
	errs = append(errs, err)
	for _, q := range []string{s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue} {
		errs = append(errs, s.c.Queue(q).Delete(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		s.logf("  (cleanup incomplete: %v)", err)
	}
}
