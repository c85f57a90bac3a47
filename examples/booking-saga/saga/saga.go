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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
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
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
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

// Booking is what the run saw of one booking.
type Booking struct {
	ID       string
	Plan     string // PlanPay, PlanLate or PlanDecline
	StateKey string // KV key of its state
	TimerKey string // key of its release timer on the releases queue

	// The reserve.
	Submission     string    // transactionId of the submission that won the gate
	Winners        int       // submissions whose reserve committed (must be 1)
	ReserveVersion int64     // version of the "reserved" state
	TimerStatus    string    // status of the schedule ("scheduled")
	TimerTxn       string    // txn of the release timer (transactionId of the fired message)
	TimerMessageID string    // messageId minted for the fired message
	DeliverAt      time.Time // when the release timer is due (leader's clock)
	TimerPayload   json.RawMessage

	// The payment.
	PaymentRequests   int    // payment requests the payment worker received
	PaymentSubmission string // the submission its payment request names
	ConfirmExpect     int64  // version the confirm expected
	CancelStatus      string // status of the confirm's cancel ("cancelled"/"absent")
	CancelTxn         string // txn the cancel answered with
	Confirmed         bool   // the confirm committed
	ConfirmVersion    int64  // version of the "confirmed" state
	PaidTooLate       bool   // the payment found the booking no longer reserved

	// The release.
	FiredMessages    int       // release messages the release handler received
	FiredAt          time.Time // createdAt of the (last) fired release message
	Released         int       // times the release handler released it
	SkippedConfirmed int       // times it found "confirmed" and only acked
	SkippedReleased  int       // times it found "released" and only acked

	// At the end.
	FinalState   string
	FinalVersion int64
	PendingTimer bool
}

// Duplicate is one second submission of a booking.
type Duplicate struct {
	BookingID  string
	Submission string // the losing submission's transactionId
	Reason     string // the transaction's reason ("kv_precondition")
	KVReason   string // "exists"
	// What the gate reported of the winner.
	WinnerVersion    int64
	WinnerSubmission string
	Acked            bool // acked on its own after losing
	// What the broker held right after the lost commit.
	StateVersionAfter    int64
	StateSubmissionAfter string
	TimerFound           bool
	TimerTxnAfter        string
	TimerMessageIDAfter  string
	TimerCount           int // pending timers under the booking's key
}

// FiredMessage is one message the release handler received.
type FiredMessage struct {
	BookingID     string
	MessageID     string
	TransactionID string
	CreatedAt     time.Time
	Data          json.RawMessage
}

// Check is one verified fact.
type Check struct {
	Desc   string
	OK     bool
	Detail string // why it failed
}

// Report is what one run saw and checked.
type Report struct {
	RunID                                       string
	BookingsQueue, PaymentsQueue, ReleasesQueue string
	Namespace                                   string

	Bookings   []*Booking
	Duplicates []*Duplicate
	Fired      []FiredMessage
	Checks     []Check

	PaymentsTotal int // messages in the payments queue at the end
	ReleasesTotal int // messages in the releases queue at the end
	PendingTimers int // pending timers on the releases queue at the end
	MaxLateness   time.Duration
	Retries       int64
	Elapsed       time.Duration
}

// Passed is the number of checks that held.
func (r Report) Passed() int {
	n := 0
	for _, c := range r.Checks {
		if c.OK {
			n++
		}
	}
	return n
}

// Failed lists the checks that did not hold.
func (r Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Print writes the per-booking table.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "  %-7s %-8s %-9s %-10s %-6s %-8s %-14s %s\n",
		"booking", "plan", "reserved", "cancel", "fired", "late", "final", "releases")
	for _, b := range r.Bookings {
		fired, late := "-", "-"
		if b.FiredMessages > 0 {
			fired = strconv.Itoa(b.FiredMessages)
			late = fmtMs(b.FiredAt.Sub(b.DeliverAt))
		}
		cancel := b.CancelStatus
		if cancel == "" {
			cancel = "-"
		}
		fmt.Fprintf(w, "  %-7s %-8s %-9s %-10s %-6s %-8s %-14s %d\n",
			b.ID, b.Plan, "v"+strconv.FormatInt(b.ReserveVersion, 10), cancel, fired, late,
			b.FinalState+" v"+strconv.FormatInt(b.FinalVersion, 10), b.Released)
	}
	fmt.Fprintf(w, "  (fired: release messages received; late: how long after its deliverAt the fired\n"+
		"  message was appended; releases: times the handler released it; %d requests retried)\n", r.Retries)
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

func fmtMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
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
	cfg Config
	c   *client
	rep *Report
	ns  string
	by  map[string]*Booking

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
		c:   &client{base: cfg.URL, hc: cfg.HTTPClient, popWait: cfg.PopWait},
		rep: &Report{
			RunID: cfg.RunID, Namespace: prefix,
			BookingsQueue: prefix + "-bookings", PaymentsQueue: prefix + "-payments", ReleasesQueue: prefix + "-releases",
		},
		ns: prefix,
		by: map[string]*Booking{},
	}
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
	err := s.run(rctx)
	cancel()
	if !cfg.Keep {
		s.cleanup()
	}
	s.rep.Retries = s.c.retries.Load()
	s.rep.Elapsed = time.Since(start)
	if err == nil {
		if failed := s.rep.Failed(); len(failed) > 0 {
			err = fmt.Errorf("%d of %d checks failed; the first: %s (%s)", len(failed), len(s.rep.Checks), failed[0].Desc, failed[0].Detail)
		}
	}
	return *s.rep, err
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
func (s *saga) idem(step string, m message) string {
	return "booking-saga/" + s.cfg.RunID + "/" + step + "/" + m.TransactionID + "/" + m.LeaseID
}

func (s *saga) run(ctx context.Context) error {
	s.logf("run %s: queues %s, %s, %s; KV namespace %s", s.cfg.RunID,
		s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue, s.ns)
	for _, q := range []string{s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue} {
		if err := s.c.configure(ctx, q, 30); err != nil {
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
	var items []pushItem
	add := func(b *Booking, i, attempt int) {
		txn := "submit-" + b.ID
		if attempt > 1 {
			txn += "-again"
		}
		items = append(items, pushItem{Queue: s.rep.BookingsQueue, TransactionID: txn, Payload: submission{
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
	if err := s.c.push(ctx, items); err != nil {
		return err
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
func (s *saga) consume(ctx context.Context, queue, group string, want int, handle func(context.Context, message) error) error {
	for handled := 0; handled < want; {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %d of %d messages handled before the deadline: %w", queue, handled, want, ctx.Err())
		}
		msgs, err := s.c.pop(ctx, queue, group)
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

// reserve is the bookings worker: one transaction holds the state, the
// release timer, the payment request and the ack.
func (s *saga) reserve(ctx context.Context, m message) error {
	var sub submission
	if err := json.Unmarshal(m.Data, &sub); err != nil {
		return fmt.Errorf("submission %s: %v", m.TransactionID, err)
	}
	b, err := s.booking(sub.BookingID)
	if err != nil {
		return err
	}
	releaseTxn := "release-" + b.ID + "-" + m.TransactionID
	payload, _ := json.Marshal(releasePayload{BookingID: b.ID, Submission: m.TransactionID, Reason: "payment window expired"})
	body := map[string]any{
		"operations": []any{
			map[string]any{"type": "push", "items": []any{pushItem{
				Queue: s.rep.PaymentsQueue, Partition: b.ID,
				// The submission is in the id: a second submission would
				// push a request of its own, which only the gate stops.
				TransactionID: "payment-" + b.ID + "-" + m.TransactionID,
				Payload:       paymentRequest{BookingID: b.ID, Submission: m.TransactionID, Cents: sub.Cents},
			}}},
			ackOp(m),
		},
		"kv": []any{map[string]any{
			"op": "putIfAbsent", "ns": s.ns, "key": b.StateKey,
			"value":      bookingState{State: StateReserved, BookingID: b.ID, Seat: sub.Seat, Submission: m.TransactionID},
			"ttlSeconds": int64(s.cfg.StateTTL / time.Second), "required": true,
		}},
		"timers": []any{map[string]any{
			"op": "schedule", "queue": s.rep.ReleasesQueue, "timerKey": b.TimerKey,
			"delayMs": float64(s.cfg.ReleaseDelay.Microseconds()) / 1000,
			"txn":     releaseTxn, "payload": base64.StdEncoding.EncodeToString(payload),
		}},
	}
	v, err := s.c.commit(ctx, body, s.idem("reserve", m))
	if err != nil {
		return err
	}
	switch {
	case v.Success:
		kv, okKV := v.first("kv")
		tm, okT := v.first("timer")
		push, okP := v.first("push")
		if !okKV || !okT || !okP || !kv.Applied || !push.Success {
			return fmt.Errorf("reserve of %s committed with unexpected results: %+v", b.ID, v.Results)
		}
		deliverAt, err := time.Parse(time.RFC3339Nano, tm.DeliverAt)
		if err != nil {
			return fmt.Errorf("reserve of %s: timer deliverAt %q: %v", b.ID, tm.DeliverAt, err)
		}
		b.Winners++
		b.Submission, b.ReserveVersion = m.TransactionID, kv.Version
		b.TimerStatus, b.TimerMessageID, b.DeliverAt, b.TimerPayload = tm.Status, tm.MessageID, deliverAt, payload
		if tm.Txn != nil {
			b.TimerTxn = *tm.Txn
		}
		s.logf("  %s: reserved by %s (state v%d, release timer %s, due %s, payment requested, submission acked)",
			b.ID, m.TransactionID, kv.Version, tm.Status, tm.DeliverAt)
		return nil
	case v.Reason == "kv_precondition":
		return s.duplicate(ctx, b, m, v)
	}
	return fmt.Errorf("reserve of %s (%s) rolled back: %s %s", b.ID, m.TransactionID, v.Reason, v.Error)
}

// duplicate handles a submission that lost the gate: it is acked on its own,
// and the broker is asked what the lost commit left behind.
func (s *saga) duplicate(ctx context.Context, b *Booking, m message, v verdict) error {
	d := &Duplicate{BookingID: b.ID, Submission: m.TransactionID, Reason: v.Reason, KVReason: v.KVReason, WinnerVersion: v.Version}
	var winner bookingState
	_ = json.Unmarshal(v.Value, &winner)
	d.WinnerSubmission = winner.Submission
	if winner.Submission == m.TransactionID {
		// This very submission reserved the booking under an earlier lease
		// whose answer never arrived (every retry of that commit failed
		// until its lease ran out). The run cannot see that reserve's
		// timer result, so it stops here rather than guess.
		return fmt.Errorf("%s: the gate names this submission itself (%s): an earlier delivery's reserve landed unseen", b.ID, m.TransactionID)
	}
	if err := s.c.ackAlone(ctx, m, s.idem("ack-duplicate", m)); err != nil {
		return err
	}
	d.Acked = true
	st, err := s.c.kvGet(ctx, s.ns, b.StateKey)
	if err != nil {
		return err
	}
	var now bookingState
	_ = json.Unmarshal(st.Value, &now)
	d.StateVersionAfter, d.StateSubmissionAfter = st.Version, now.Submission
	p, err := s.c.peekTimer(ctx, s.rep.ReleasesQueue, b.TimerKey)
	if err != nil {
		return err
	}
	d.TimerFound, d.TimerTxnAfter, d.TimerMessageIDAfter = p.Found, p.Txn, p.MessageID
	if d.TimerCount, err = s.c.countTimers(ctx, s.rep.ReleasesQueue, b.TimerKey); err != nil {
		return err
	}
	s.rep.Duplicates = append(s.rep.Duplicates, d)
	timer := "no timer pending"
	if p.Found {
		timer = "timer still " + p.Txn
	}
	s.logf("  %s: duplicate %s lost the gate (%s: %s, winner %s v%d), acked on its own; state v%d, %s, %d timer(s) under its key",
		b.ID, m.TransactionID, v.Reason, v.KVReason, winner.Submission, v.Version, st.Version, timer, d.TimerCount)
	return nil
}

// payments runs the payment worker. The payment requests are in one
// partition per booking, so a late payment holding its lease does not hold
// up the others; it runs in a goroutine of its own.
func (s *saga) payments(ctx context.Context) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lateErr error
	err := s.consume(ctx, s.rep.PaymentsQueue, "payer", s.cfg.Bookings, func(ctx context.Context, m message) error {
		var req paymentRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
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
			if err := s.c.ackAlone(ctx, m, s.idem("decline", m)); err != nil {
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
func (s *saga) latePayment(ctx context.Context, b *Booking, m message) error {
	for {
		p, err := s.c.peekTimer(ctx, s.rep.ReleasesQueue, b.TimerKey)
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
func (s *saga) confirm(ctx context.Context, b *Booking, m message) error {
	st, err := s.c.kvGet(ctx, s.ns, b.StateKey)
	if err != nil {
		return err
	}
	var cur bookingState
	if st.Found {
		_ = json.Unmarshal(st.Value, &cur)
	}
	if cur.State != StateReserved {
		b.PaidTooLate = true
		s.logf("  %s: the payment found the booking %q; it would be refunded", b.ID, cur.State)
		return s.c.ackAlone(ctx, m, s.idem("refund", m))
	}
	b.ConfirmExpect = st.Version
	v, err := s.c.commit(ctx, map[string]any{
		"operations": []any{ackOp(m)},
		"kv": []any{map[string]any{
			"op": "put", "ns": s.ns, "key": b.StateKey,
			"value":      bookingState{State: StateConfirmed, BookingID: b.ID, Seat: cur.Seat, Submission: cur.Submission, Payment: m.TransactionID},
			"ttlSeconds": int64(s.cfg.StateTTL / time.Second), "expect": st.Version, "required": true,
		}},
		"timers": []any{map[string]any{"op": "cancel", "queue": s.rep.ReleasesQueue, "timerKey": b.TimerKey, "txn": b.TimerTxn}},
	}, s.idem("confirm", m))
	if err != nil {
		return err
	}
	switch {
	case v.Success:
		kv, okKV := v.first("kv")
		tm, okT := v.first("timer")
		if !okKV || !okT || !kv.Applied {
			return fmt.Errorf("confirm of %s committed with unexpected results: %+v", b.ID, v.Results)
		}
		b.Confirmed, b.ConfirmVersion, b.CancelStatus = true, kv.Version, tm.Status
		if tm.Txn != nil {
			b.CancelTxn = *tm.Txn
		}
		s.logf("  %s: paid; confirmed (expect v%d, now v%d), release timer %s, payment request acked", b.ID, st.Version, kv.Version, tm.Status)
		return nil
	case v.Reason == "kv_precondition":
		// The release handler moved the state between the read and the
		// commit: the payment came too late.
		b.PaidTooLate = true
		s.logf("  %s: the confirm lost its gate (%s); it would be refunded", b.ID, v.KVReason)
		return s.c.ackAlone(ctx, m, s.idem("refund", m))
	}
	return fmt.Errorf("confirm of %s rolled back: %s %s", b.ID, v.Reason, v.Error)
}

// release is the handler of the fired release messages. It reads the state
// before acting: only a booking still reserved is released (put with
// expect + ack in one transaction); a confirmed one just has its message
// acked.
func (s *saga) release(ctx context.Context, m message) error {
	var p releasePayload
	if err := json.Unmarshal(m.Data, &p); err != nil {
		return fmt.Errorf("release message %s: %v", m.TransactionID, err)
	}
	b, err := s.booking(p.BookingID)
	if err != nil {
		return err
	}
	created, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
	if err != nil {
		return fmt.Errorf("release message %s: createdAt %q: %v", m.TransactionID, m.CreatedAt, err)
	}
	b.FiredMessages++
	b.FiredAt = created
	s.rep.Fired = append(s.rep.Fired, FiredMessage{BookingID: b.ID, MessageID: m.ID, TransactionID: m.TransactionID, CreatedAt: created, Data: m.Data})
	arrived := fmt.Sprintf("appended %s after its deliverAt", fmtMs(created.Sub(b.DeliverAt)))
	for attempt := 1; attempt <= 5; attempt++ {
		st, err := s.c.kvGet(ctx, s.ns, b.StateKey)
		if err != nil {
			return err
		}
		var cur bookingState
		if st.Found {
			_ = json.Unmarshal(st.Value, &cur)
		}
		switch cur.State {
		case StateReserved:
			v, err := s.c.commit(ctx, map[string]any{
				"operations": []any{ackOp(m)},
				"kv": []any{map[string]any{
					"op": "put", "ns": s.ns, "key": b.StateKey,
					"value": bookingState{State: StateReleased, BookingID: b.ID, Seat: cur.Seat, Submission: cur.Submission,
						Reason: "no payment by " + b.DeliverAt.Format(time.RFC3339Nano)},
					"ttlSeconds": int64(s.cfg.StateTTL / time.Second), "expect": st.Version, "required": true,
				}},
			}, s.idem("release-"+strconv.Itoa(attempt), m))
			if err != nil {
				return err
			}
			if v.Success {
				b.Released++
				s.logf("  %s: release message %s; state was reserved v%d: released, message acked", b.ID, arrived, st.Version)
				return nil
			}
			if v.Reason == "kv_precondition" {
				continue // the state moved since the read: read it again
			}
			return fmt.Errorf("release of %s rolled back: %s %s", b.ID, v.Reason, v.Error)
		case StateConfirmed:
			b.SkippedConfirmed++
			s.logf("  %s: release message %s; state is confirmed v%d: the payment won, message only acked", b.ID, arrived, st.Version)
			return s.c.ackAlone(ctx, m, s.idem("release-skip", m))
		case StateReleased:
			b.SkippedReleased++
			s.logf("  %s: release message %s; already released, message only acked", b.ID, arrived)
			return s.c.ackAlone(ctx, m, s.idem("release-skip", m))
		default:
			return fmt.Errorf("release of %s: unexpected state %q (found=%v)", b.ID, cur.State, st.Found)
		}
	}
	return fmt.Errorf("release of %s: the state kept moving under 5 attempts", b.ID)
}

// verify reads the final state back and runs the checks.
func (s *saga) verify(ctx context.Context) error {
	for _, b := range s.rep.Bookings {
		st, err := s.c.kvGet(ctx, s.ns, b.StateKey)
		if err != nil {
			return err
		}
		var cur bookingState
		_ = json.Unmarshal(st.Value, &cur)
		b.FinalState, b.FinalVersion = cur.State, st.Version
		p, err := s.c.peekTimer(ctx, s.rep.ReleasesQueue, b.TimerKey)
		if err != nil {
			return err
		}
		b.PendingTimer = p.Found
	}
	var err error
	if s.rep.PendingTimers, err = s.c.countTimers(ctx, s.rep.ReleasesQueue, "booking/"); err != nil {
		return err
	}
	if s.rep.PaymentsTotal, err = s.c.queueTotal(ctx, s.rep.PaymentsQueue); err != nil {
		return err
	}
	if s.rep.ReleasesTotal, err = s.c.queueTotal(ctx, s.rep.ReleasesQueue); err != nil {
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
			errs = append(errs, s.c.cancelTimer(ctx, s.rep.ReleasesQueue, b.TimerKey))
		}
	}
	errs = append(errs, s.c.kvDelete(ctx, s.ns, keys))
	for _, q := range []string{s.rep.BookingsQueue, s.rep.PaymentsQueue, s.rep.ReleasesQueue} {
		errs = append(errs, s.c.deleteQueue(ctx, q))
	}
	if err := errors.Join(errs...); err != nil {
		s.logf("  (cleanup incomplete: %v)", err)
	}
}
