// Package saga runs a booking saga against a queen-node broker: a state
// machine in the broker's KV store and a compensating timer, each step
// committed in ONE transaction with the ack of the message that caused it.
//
//	bookings ──reserve──▶ state "reserved" (putIfAbsent, required)
//	                      + release timer (delay) on the releases queue
//	                      + payment request on the payments queue
//	                      + ack of the submission
//	payments ──confirm──▶ state "confirmed" (put, expect = reserve version, required)
//	                      + cancel of the release timer
//	                      + ack of the payment request
//	releases ──release──▶ (only if the state still says "reserved")
//	                      state "released" (put, expect, required) + ack
//
// A second submission of the same booking loses the putIfAbsent gate, so
// its transaction rolls back whole: no second timer, no second payment
// request. A booking whose payment never comes is released when its timer
// fires; a payment that comes after the timer fired still confirms, and the
// release handler, which reads the state before acting, then only acks.
//
// Run(ctx, Config) drives the whole saga with fresh queue and namespace
// names, checks the outcome and returns a Report.
package saga

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// What the payment worker does with a booking's payment request.
const (
	// PlanPay: the payment succeeds at once. The booking is confirmed and
	// the confirm cancels the release timer ("cancelled").
	PlanPay = "pay"
	// PlanLate: the payment succeeds only after the release timer fired.
	// The confirm still wins (the release handler has not acted yet), its
	// cancel finds nothing pending ("absent"), and the release handler then
	// finds "confirmed" and only acks its message.
	PlanLate = "late"
	// PlanDecline: the card is declined and the booking stays reserved. The
	// release timer fires and the release handler releases it.
	PlanDecline = "decline"
)

// Booking states stored in KV.
const (
	StateReserved  = "reserved"
	StateConfirmed = "confirmed"
	StateReleased  = "released"
)

// Config is one run of the saga. Zero fields take the defaults.
type Config struct {
	// URL is the broker's HTTP address (default http://127.0.0.1:6632).
	URL string
	// HTTPClient sends the requests (default: a client of its own).
	HTTPClient *http.Client
	// Log receives the progress and the "ok:" lines (nil: discarded).
	Log io.Writer

	// Bookings is the number of bookings (default 6).
	Bookings int
	// Declined bookings have their payment declined and are released by
	// their timer (default 2). Late bookings are paid after their timer
	// fired (default 1). The rest are paid at once. Use -1 for none.
	Declined, Late int
	// Duplicates is the number of bookings submitted a second time
	// (default 2; -1 for none).
	Duplicates int
	// ReleaseDelay is the delay of each release timer (default 1500 ms).
	ReleaseDelay time.Duration
	// PopWait is the long-poll limit of one pop (default 1 s).
	PopWait time.Duration
	// Timeout bounds the whole run (default 60 s).
	Timeout time.Duration
	// StateTTL is the ttlSeconds of the booking states (default 1 h).
	StateTTL time.Duration
	// RunID names the queues and the namespace (default: derived from the
	// clock). Lower-case letters, digits, '.', '_' and '-'.
	RunID string
	// Keep leaves the queues and the KV states behind after the run.
	Keep bool
}

var runIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,40}$`)

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:6632"
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Bookings == 0 {
		c.Bookings = 6
	}
	def := func(v *int, d int) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&c.Declined, 2)
	def(&c.Late, 1)
	def(&c.Duplicates, 2)
	if c.ReleaseDelay == 0 {
		c.ReleaseDelay = 1500 * time.Millisecond
	}
	if c.PopWait == 0 {
		c.PopWait = time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.StateTTL == 0 {
		c.StateTTL = time.Hour
	}
	if c.RunID == "" {
		c.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Bookings < 1 || c.Bookings > 999:
		return fmt.Errorf("bookings must be 1..999, got %d", c.Bookings)
	case c.Declined+c.Late > c.Bookings:
		return fmt.Errorf("declined (%d) + late (%d) exceed the %d bookings", c.Declined, c.Late, c.Bookings)
	case c.Duplicates > c.Bookings:
		return fmt.Errorf("duplicates (%d) exceed the %d bookings", c.Duplicates, c.Bookings)
	case c.ReleaseDelay < 0:
		return errors.New("the release delay must not be negative")
	case c.StateTTL < time.Second:
		return errors.New("the state TTL must be at least 1 s")
	case !runIDPattern.MatchString(c.RunID):
		return fmt.Errorf("run id %q: want %s", c.RunID, runIDPattern)
	}
	return nil
}

// bookingState is the value stored under a booking's key.
type bookingState struct {
	State      string `json:"state"`
	BookingID  string `json:"bookingId"`
	Seat       string `json:"seat,omitempty"`
	Submission string `json:"submission"`
	Payment    string `json:"payment,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// submission is a booking request on the bookings queue.
type submission struct {
	BookingID string `json:"bookingId"`
	Seat      string `json:"seat"`
	Cents     int    `json:"cents"`
	Attempt   int    `json:"attempt"`
}

// paymentRequest is what a reserve pushes to the payments queue.
type paymentRequest struct {
	BookingID  string `json:"bookingId"`
	Submission string `json:"submission"`
	Cents      int    `json:"cents"`
}

// releasePayload is the body of a release timer's message.
type releasePayload struct {
	BookingID  string `json:"bookingId"`
	Submission string `json:"submission"`
	Reason     string `json:"reason"`
}

type saga struct {
	cfg     Config
	c       *queen.Client
	retries atomic.Int64 // requests c retried
	rep     *Report
	ns      string
	by      map[string]*Booking

	logMu sync.Mutex
}

// Run runs the saga once against cfg.URL and checks it. The error is
// non-nil when the run could not be completed or a check failed; the
// report holds what was seen either way.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	prefix := "booking-saga-" + cfg.RunID
	s := &saga{
		cfg: cfg,
		rep: &Report{
			RunID: cfg.RunID, Namespace: prefix,
			BookingsQueue: prefix + "-bookings", PaymentsQueue: prefix + "-payments", ReleasesQueue: prefix + "-releases",
		},
		ns: prefix,
		by: map[string]*Booking{},
	}
	c, err := s.dial()
	if err != nil {
		return Report{}, err
	}
	defer c.Close()
	s.c = c
	for i := 0; i < cfg.Bookings; i++ {
		id := fmt.Sprintf("BK-%03d", i+1)
		plan := PlanPay
		switch {
		case i >= cfg.Bookings-cfg.Declined:
			plan = PlanDecline
		case i >= cfg.Bookings-cfg.Declined-cfg.Late:
			plan = PlanLate
		}
		b := &Booking{ID: id, Plan: plan, StateKey: "booking:" + id, TimerKey: "booking/" + id}
		s.rep.Bookings = append(s.rep.Bookings, b)
		s.by[id] = b
	}

	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	err = s.run(rctx)
	cancel()
	if !cfg.Keep {
		s.cleanup()
	}
	s.rep.Retries = s.retries.Load()
	s.rep.Elapsed = time.Since(start)
	if err == nil {
		if failed := s.rep.Failed(); len(failed) > 0 {
			err = fmt.Errorf("%d of %d checks failed; the first: %s (%s)", len(failed), len(s.rep.Checks), failed[0].Desc, failed[0].Detail)
		}
	}
	return *s.rep, err
}

// dial makes the saga's client (package queen, over the HTTP API). Every
// call is retried on a 503, a 429, a 500, a 409 (the same Idempotency-Key
// still in flight) or a transport error, with backoff (25 ms doubling to
// 1 s, with jitter) until the run's deadline, and each send waits at most
// 10 s for its answer (a pop: its long-poll more). A retry is safe for
// every request the saga sends: reads are reads, a push carries a
// deterministic transactionId (a repeat is a "duplicate"), and every
// commit carries an Idempotency-Key, so a retry of a commit whose first
// attempt landed is answered from the broker's record of it instead of
// running again.
func (s *saga) dial() (*queen.Client, error) {
	opts := []queen.Option{queen.WithRetry(queen.RetryPolicy{
		MaxAttempts: -1, BaseDelay: 25 * time.Millisecond, MaxDelay: time.Second, RateLimited: true,
		AttemptTimeout: 10 * time.Second, OnRetry: func(error) { s.retries.Add(1) },
	})}
	if s.cfg.HTTPClient != nil {
		opts = append(opts, queen.WithHTTPClient(s.cfg.HTTPClient))
	}
	return queen.New(s.cfg.URL, opts...)
}

func (s *saga) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.cfg.Log, format+"\n", args...)
}

// check records one fact; detail explains a failure.
func (s *saga) check(ok bool, desc, detail string) {
	s.rep.Checks = append(s.rep.Checks, Check{Desc: desc, OK: ok, Detail: detail})
	if ok {
		s.logf("  ok: %s", desc)
	} else {
		s.logf("  FAIL: %s: %s", desc, detail)
	}
}

// idem is the Idempotency-Key of one commit: the step, the message and the
// lease it came under. A redelivery (a new lease) is a new request.
func (s *saga) idem(step string, m *queen.Message) string {
	return "booking-saga/" + s.cfg.RunID + "/" + step + "/" + m.TransactionID + "/" + m.LeaseID
}

// tx starts a commit of step for m under its Idempotency-Key.
func (s *saga) tx(step string, m *queen.Message) *queen.Tx {
	return s.c.Transaction().IdempotencyKey(s.idem(step, m))
}

// ackAlone acknowledges one message on its own, under its lease. It is a
// transaction holding just the ack, so that it can carry an Idempotency-Key
// and a retry after an unknown outcome is answered from the record.
func (s *saga) ackAlone(ctx context.Context, step string, m *queen.Message) error {
	if _, err := s.tx(step, m).Ack(m).Commit(ctx); err != nil {
		return fmt.Errorf("ack of %s refused: %w", m.TransactionID, err)
	}
	return nil
}

func (s *saga) run(ctx context.Context) error {
	s.logf("run %s: queues %s, %s, %s; KV namespace %s", s.cfg.RunID,
		s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue, s.ns)
	for _, q := range []string{s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue} {
		if err := s.c.Queue(q).Configure(ctx, queen.LeaseTime(30*time.Second), queen.RetryLimit(3)); err != nil {
			return err
		}
	}
	if err := s.submit(ctx); err != nil {
		return err
	}
	s.logf("\nreserving")
	if err := s.consume(ctx, s.rep.BookingsQueue, "reserver", s.cfg.Bookings+s.cfg.Duplicates, s.reserve); err != nil {
		return fmt.Errorf("reserving: %w", err)
	}
	s.logf("\npaying")
	if err := s.payments(ctx); err != nil {
		return fmt.Errorf("paying: %w", err)
	}
	s.logf("\nreleasing")
	fired := 0
	for _, b := range s.rep.Bookings {
		if b.Plan != PlanPay {
			fired++
		}
	}
	if err := s.consume(ctx, s.rep.ReleasesQueue, "releaser", fired, s.release); err != nil {
		return fmt.Errorf("releasing: %w", err)
	}
	s.logf("\nchecking")
	return s.verify(ctx)
}

// submit queues every booking once, then the duplicates: the same booking
// id in a different message. One partition, so they are reserved in this
// order.
func (s *saga) submit(ctx context.Context) error {
	s.logf("\nsubmitting")
	var items []queen.Msg
	add := func(b *Booking, i, attempt int) {
		txn := "submit-" + b.ID
		if attempt > 1 {
			txn += "-again"
		}
		items = append(items, queen.Msg{TransactionID: txn, Data: submission{
			BookingID: b.ID, Seat: fmt.Sprintf("%d%c", 10+i, 'A'+rune(i%6)), Cents: 12000 + 100*i, Attempt: attempt,
		}})
	}
	for i, b := range s.rep.Bookings {
		add(b, i, 1)
	}
	// Duplicates: every step-th booking from the end, so that with the
	// defaults one declined and one paid booking are submitted twice.
	n, d := s.cfg.Bookings, s.cfg.Duplicates
	var dupIDs []string
	if d > 0 {
		step := max(1, n/d)
		for j := 0; j < d; j++ {
			i := (n - 1 - j*step + n) % n
			add(s.rep.Bookings[i], i, 2)
			dupIDs = append(dupIDs, s.rep.Bookings[i].ID)
		}
	}
	res, err := s.c.Queue(s.rep.BookingsQueue).Push(ctx, items...)
	if err != nil {
		return err
	}
	for _, r := range res {
		// queued, or duplicate when a retried request had already landed
		if r.Status != "queued" && r.Status != "duplicate" {
			return fmt.Errorf("push of %s came back %q (%s)", r.TransactionID, r.Status, r.Error)
		}
	}
	if d == 0 {
		s.logf("  %s queued, no duplicates", plural(n, "booking"))
	} else {
		s.logf("  %s and %s (%s) queued", plural(n, "booking"), plural(d, "duplicate submission"), strings.Join(dupIDs, ", "))
	}
	return nil
}

// consume pops queue for group one message at a time until want messages
// were handled. An empty pop (204) just polls again; the run's deadline
// ends a stall.
func (s *saga) consume(ctx context.Context, queue, group string, want int, handle func(context.Context, *queen.Message) error) error {
	for handled := 0; handled < want; {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %d of %d messages handled before the deadline: %w", queue, handled, want, ctx.Err())
		}
		msgs, err := s.c.Queue(queue).Pop(ctx, queen.PopOptions{Group: group, Subscription: queen.SubscribeAll, Batch: 1, Wait: s.cfg.PopWait})
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := handle(ctx, m); err != nil {
				return err
			}
			handled++
		}
	}
	return nil
}

func (s *saga) booking(id string) (*Booking, error) {
	b := s.by[id]
	if b == nil {
		return nil, fmt.Errorf("a message names booking %q, which this run did not submit", id)
	}
	return b, nil
}
