package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/queen-node/queen-node/examples/booking-saga/saga"
)

// TestBookingSaga runs the booking saga (examples/booking-saga) against a
// fresh node: reserve = state putIfAbsent (required) + release timer +
// payment request + ack in one transaction; confirm = put with expect +
// timer cancel + ack; release = read the state, then put released with
// expect + ack only if it is still reserved. Duplicates of a paid, a late
// and a declined booking must lose the gate and write nothing.
func TestBookingSaga(t *testing.T) {
	n := startNode(t, nodeOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var log bytes.Buffer
	start := time.Now()
	rep, err := saga.Run(ctx, saga.Config{
		URL:          "http://" + n.Addrs().HTTP,
		HTTPClient:   n.client,
		Log:          &log,
		Bookings:     8,
		Declined:     2,
		Late:         2,
		Duplicates:   3,                       // BK-008 (declined), BK-006 (late), BK-004 (paid)
		ReleaseDelay: 2500 * time.Millisecond, // margin for a loaded CI machine
		Timeout:      60 * time.Second,
	})
	var table bytes.Buffer
	rep.Print(&table)
	t.Logf("saga ran in %v\n%s\n%s", time.Since(start).Round(time.Millisecond), log.String(), table.String())
	if err != nil {
		t.Fatalf("saga.Run: %v", err)
	}
	n.requireRunning()

	if len(rep.Checks) == 0 || rep.Passed() != len(rep.Checks) {
		t.Fatalf("%d of %d checks passed: %+v", rep.Passed(), len(rep.Checks), rep.Failed())
	}
	// The report itself, read independently of the saga's own checks.
	plans := map[string]int{}
	for _, b := range rep.Bookings {
		plans[b.Plan]++
		switch b.Plan {
		case saga.PlanPay:
			if b.FinalState != saga.StateConfirmed || b.CancelStatus != "cancelled" || b.FiredMessages != 0 || b.PendingTimer {
				t.Errorf("%s (paid): final %q, cancel %q, %d release messages, pending timer %v; want confirmed, cancelled, 0, false",
					b.ID, b.FinalState, b.CancelStatus, b.FiredMessages, b.PendingTimer)
			}
		case saga.PlanLate:
			if b.FinalState != saga.StateConfirmed || b.CancelStatus != "absent" || b.FiredMessages != 1 || b.SkippedConfirmed != 1 || b.Released != 0 {
				t.Errorf("%s (late): final %q, cancel %q, %d release messages, %d skipped, %d released; want confirmed, absent, 1, 1, 0",
					b.ID, b.FinalState, b.CancelStatus, b.FiredMessages, b.SkippedConfirmed, b.Released)
			}
		case saga.PlanDecline:
			if b.FinalState != saga.StateReleased || b.Released != 1 || b.FiredMessages != 1 || b.Confirmed {
				t.Errorf("%s (declined): final %q, released %d times from %d messages, confirmed %v; want released, 1, 1, false",
					b.ID, b.FinalState, b.Released, b.FiredMessages, b.Confirmed)
			}
		}
		if b.Winners != 1 || b.PaymentRequests != 1 {
			t.Errorf("%s: %d reserves committed, %d payment requests; want 1 and 1", b.ID, b.Winners, b.PaymentRequests)
		}
		if b.FiredMessages > 0 && b.FiredAt.Before(b.DeliverAt) {
			t.Errorf("%s: the release message was appended at %v, before its deliverAt %v", b.ID, b.FiredAt, b.DeliverAt)
		}
	}
	if plans[saga.PlanPay] != 4 || plans[saga.PlanLate] != 2 || plans[saga.PlanDecline] != 2 {
		t.Errorf("plans %v, want 4 pay, 2 late, 2 decline", plans)
	}
	if len(rep.Duplicates) != 3 {
		t.Errorf("%d duplicates lost the gate, want 3", len(rep.Duplicates))
	}
	for _, d := range rep.Duplicates {
		if d.Reason != "kv_precondition" || d.KVReason != "exists" || !d.Acked || d.TimerCount > 1 {
			t.Errorf("duplicate %+v: want kv_precondition/exists, acked, at most the winner's timer", d)
		}
	}
	if rep.PaymentsTotal != 8 || rep.ReleasesTotal != 4 || rep.PendingTimers != 0 || len(rep.Fired) != 4 {
		t.Errorf("payments queue %d, releases queue %d, pending timers %d, fired %d; want 8, 4, 0, 4",
			rep.PaymentsTotal, rep.ReleasesTotal, rep.PendingTimers, len(rep.Fired))
	}
}
