package queen_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

type reminder struct {
	Order string `json:"order"`
}

// Schedule, peek, list, count, reschedule and cancel on their own routes;
// a cancel of nothing pending is a result, not an error.
func TestTimersStandalone(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		tm := c.Timers()
		res, err := tm.Apply(ctx,
			queen.ScheduleTimer("reminders", "order/1", time.Hour, reminder{"o1"}, queen.WithTransactionID("remind-o1"), queen.WithPartition("p1")),
			queen.ScheduleTimer("reminders", "order/2", time.Hour, reminder{"o2"}),
			queen.ScheduleTimer("reminders", "other/3", time.Hour, nil))
		if err != nil || len(res) != 3 {
			t.Fatalf("schedule: %+v %v", res, err)
		}
		r := res[0]
		if !r.OK || r.Status != queen.TimerScheduled || r.Queue != "reminders" || r.Key != "order/1" || r.TransactionID != "remind-o1" ||
			r.MessageID == "" || time.Until(r.DeliverAt) < 59*time.Minute {
			t.Fatalf("schedule result: %+v", r)
		}
		if txn := res[1].TransactionID; len(txn) != 36 || txn[14] != '7' {
			t.Fatalf("minted txn %q is not a UUIDv7", txn)
		}

		got, err := tm.Get(ctx, "reminders", "order/1")
		var body reminder
		if err != nil || !got.Found || got.TransactionID != "remind-o1" || got.MessageID != r.MessageID || got.Partition != "p1" ||
			!got.DeliverAt.Equal(r.DeliverAt) || got.Decode(&body) != nil || body.Order != "o1" || got.CreatedAt.IsZero() {
			t.Fatalf("peek: %+v (%s) %v", got, got.Data, err)
		}
		if n, err := tm.Count(ctx, "reminders", "order/"); err != nil || n != 2 {
			t.Fatalf("count order/: %d %v", n, err)
		}
		page, err := tm.List(ctx, "reminders", "", 2)
		if err != nil || len(page.Timers) != 2 || !page.Truncated || page.NextAfter != "order/2" || page.Timers[0].Key != "order/1" ||
			page.Timers[0].Data != nil || !page.Timers[0].Found {
			t.Fatalf("list page 1: %+v %v", page, err)
		}
		page, err = tm.List(ctx, "reminders", page.NextAfter, 2)
		if err != nil || len(page.Timers) != 1 || page.Truncated || page.Timers[0].Key != "other/3" {
			t.Fatalf("list page 2: %+v %v", page, err)
		}

		res, err = tm.Apply(ctx, queen.RescheduleTimer("reminders", "order/1", 2*time.Hour, reminder{"o1"}, queen.WithTransactionID("remind-o1-again")))
		if err != nil || res[0].Status != queen.TimerRescheduled || res[0].TransactionID != "remind-o1-again" {
			t.Fatalf("reschedule: %+v %v", res, err)
		}
		cr, err := tm.Cancel(ctx, "reminders", "order/1")
		if err != nil || !cr.OK || cr.Status != queen.TimerCancelled || cr.TransactionID != "remind-o1-again" {
			t.Fatalf("cancel: %+v %v", cr, err)
		}
		cr, err = tm.Cancel(ctx, "reminders", "order/1", queen.WithTransactionID("echo-me"))
		if err != nil || cr.OK || cr.Status != queen.TimerAbsent || cr.TransactionID != "echo-me" {
			t.Fatalf("second cancel: %+v %v", cr, err)
		}
		res, err = tm.Apply(ctx, queen.CancelTimer("reminders", "order/2"), queen.CancelTimer("reminders", "nothing"))
		if err != nil || res[0].Status != queen.TimerCancelled || res[1].Status != queen.TimerAbsent {
			t.Fatalf("cancel in a batch: %+v %v", res, err)
		}
		if got, err := tm.Get(ctx, "reminders", "order/1"); err != nil || got.Found {
			t.Fatalf("peek after cancel: %+v %v", got, err)
		}
	})
}

// A timer fires as the message it announced: its id, its txn as the
// transactionId, its payload, appended no earlier than deliverAt.
func TestTimerFires(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		res, err := c.Timers().Apply(ctx, queen.ScheduleTimer("due", "k", 200*time.Millisecond, reminder{"o9"}, queen.WithTransactionID("fire-1")))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Queue("due").Pop(ctx, queen.PopOptions{Wait: 5 * time.Second})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		m := msgs[0]
		var body reminder
		if m.ID != res[0].MessageID || m.TransactionID != "fire-1" || m.Decode(&body) != nil || body.Order != "o9" || m.CreatedAt.Before(res[0].DeliverAt) {
			t.Fatalf("fired %+v (%s), scheduled %+v", m, m.Data, res[0])
		}
		if got, err := c.Timers().Get(ctx, "due", "k"); err != nil || got.Found {
			t.Fatalf("a fired timer is still pending: %+v %v", got, err)
		}
	})
}

// Timer ops in a transaction commit with it, and a rolled-back transaction
// schedules nothing.
func TestTimersInTransaction(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		q := c.Queue("bookings")
		if _, err := q.Push(ctx, queen.Msg{TransactionID: "b1"}, queen.Msg{TransactionID: "b2"}); err != nil {
			t.Fatal(err)
		}
		msgs, err := q.Pop(ctx, queen.PopOptions{Batch: 2})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		res, err := c.Transaction().
			Once("bookings", "b1", time.Hour).
			Ack(msgs[0]).
			Timers(queen.ScheduleTimer("releases", "booking/b1", time.Hour, reminder{"b1"}, queen.WithTransactionID("release-b1"))).
			Commit(ctx)
		if err != nil || !res.Committed || len(res.Results) != 3 {
			t.Fatalf("commit: %+v %v", res, err)
		}
		tr := res.Results[2].Timer
		if res.Results[2].Type != "timer" || tr == nil || tr.Status != queen.TimerScheduled || tr.TransactionID != "release-b1" ||
			tr.MessageID == "" || tr.DeliverAt.IsZero() || res.Results[2].MessageID != "" {
			t.Fatalf("timer result: %+v %+v", res.Results[2], tr)
		}
		// The same gate again rolls back, timer included.
		res, err = c.Transaction().Once("bookings", "b1", time.Hour).Ack(msgs[1]).
			Timers(queen.ScheduleTimer("releases", "booking/b1-again", time.Hour, nil)).Commit(ctx)
		if err != nil || res.Committed || res.Precondition == nil {
			t.Fatalf("lost gate: %+v %v", res, err)
		}
		if n, err := c.Timers().Count(ctx, "releases", "booking/"); err != nil || n != 1 {
			t.Fatalf("a rolled-back transaction scheduled: %d timers, %v", n, err)
		}
		res, err = c.Transaction().Ack(msgs[1]).
			Timers(queen.CancelTimer("releases", "booking/b1"), queen.CancelTimer("releases", "booking/none")).Commit(ctx)
		if err != nil || !res.Committed || res.Results[1].Timer.Status != queen.TimerCancelled || res.Results[1].Timer.TransactionID != "release-b1" ||
			res.Results[2].Timer.Status != queen.TimerAbsent {
			t.Fatalf("cancels: %+v %v", res, err)
		}
	})
}

// A malformed op refuses the whole call with INVALID_ARGUMENT (HTTP 400),
// in a transaction too, and schedules nothing; what cannot be built is
// refused before anything is sent.
func TestTimersRefused(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		tm := c.Timers()
		_, err := tm.Apply(ctx, queen.ScheduleTimer("q", "fine", time.Hour, 1), queen.ScheduleTimer("q", "", time.Hour, 2))
		var qe *queen.Error
		if !errors.As(err, &qe) || qe.Code != codes.InvalidArgument || qe.Reason != "timers_bad_key" || qe.Retryable() {
			t.Fatalf("empty timer key: %#v", err)
		}
		if qe.Status != 0 && qe.Status != 400 {
			t.Fatalf("HTTP status %d, want 400", qe.Status)
		}
		_, err = c.Transaction().Timers(queen.ScheduleTimer("q", "fine", time.Hour, 1), queen.ScheduleTimer("q", "fine", time.Hour, 2)).Commit(ctx)
		if queen.Code(err) != codes.InvalidArgument {
			t.Fatalf("the same key twice in a transaction: %v", err)
		}
		if n, err := tm.Count(ctx, "q", "f"); err != nil || n != 0 {
			t.Fatalf("refused calls scheduled %d timers (%v)", n, err)
		}
		if _, err := tm.Count(ctx, "q", ""); !errors.As(err, &qe) || qe.Code != codes.InvalidArgument || qe.Reason != "timers_count_prefix_required" {
			t.Fatalf("count without a prefix: %v", err)
		}
		if _, err := tm.Apply(ctx, queen.ScheduleTimer("q", "k", 0, 1, queen.WithTraceID("0190a6a4-0000-7000-8000-000000000000"))); err == nil {
			t.Fatal("a timer with a trace id was accepted")
		}
		if _, err := tm.Cancel(ctx, "q", "k", queen.WithPartition("p")); err == nil {
			t.Fatal("a cancel with a partition was accepted")
		}
		if _, err := c.Transaction().Timers(queen.ScheduleTimer("q", "k", 0, func() {})).Commit(ctx); err == nil {
			t.Fatal("a payload that does not marshal was sent")
		}
	})
}

// Queue.Stats is the HTTP API's queue detail; over gRPC it is UNIMPLEMENTED
// and sends nothing.
func TestQueueStats(t *testing.T) {
	n := grpctest.Start(t, grpctest.Options{})
	ctx := ctxT(t, 20*time.Second)
	c := dialNode(t, n, "http")
	q := c.Queue("counted")
	if _, err := q.Push(ctx, queen.Msg{Data: 1}, queen.Msg{Data: 2}); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Total != 2 || st.Pending != 2 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	if _, err := c.Queue("nope").Stats(ctx); queen.Code(err) != codes.NotFound {
		t.Fatalf("stats of a missing queue: %v", err)
	}
	if _, err := dialNode(t, n, "grpc").Queue("counted").Stats(ctx); queen.Code(err) != codes.Unimplemented {
		t.Fatalf("stats over gRPC: %v", err)
	}
}
