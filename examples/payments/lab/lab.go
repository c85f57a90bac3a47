// Package lab is the payments lab of the "exactly-once is a myth" day, run
// against a real queen-node broker instead of a toy queue.
//
// A thousand payments of 100 each go to a queue, spread over several
// partitions so that several workers charge at once (a lease covers a whole
// partition for one consumer group). A deterministic crash plan kills about
// one delivery in ten: the worker abandons the delivery without acking it,
// the lease runs out (the queue's leaseTime is a second or two) and the
// broker delivers the message again. The same plan is replayed in three
// modes, each on its own queue and KV namespace:
//
//  1. at-least-once, no marker: charge, then ack. A crash between the two
//     is redelivered and charged again: duplicates.
//  2. ack first: ack, then charge. A crash between the two loses the
//     payment: it is never charged and never comes back.
//  3. marker + ack transaction: read the "already charged" marker; if it is
//     there, only ack; otherwise commit ONE transaction holding the marker
//     (putIfAbsent, required), the ack (with its lease) and the charge
//     itself (a push of the ledger entry to a ledger queue). Crashes before
//     the commit change nothing; a crash right after sending the commit
//     loses only the reply, and the worker that replays the delivery finds
//     the marker and charges nothing.
//
// Run returns the three-way scoreboard.
package lab

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mode is one of the three ways to order the charge and the ack.
type Mode int

const (
	// AtLeastOnce charges, then acks.
	AtLeastOnce Mode = 1
	// AckFirst acks, then charges.
	AckFirst Mode = 2
	// MarkerTransaction commits marker + ack + charge in one transaction.
	MarkerTransaction Mode = 3
)

// AllModes is the order the lab runs them in.
var AllModes = []Mode{AtLeastOnce, AckFirst, MarkerTransaction}

func (m Mode) String() string {
	switch m {
	case AtLeastOnce:
		return "at-least-once, no marker"
	case AckFirst:
		return "ack first"
	case MarkerTransaction:
		return "marker + ack transaction"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

func (m Mode) short() string {
	return [...]string{"", "alo", "ackfirst", "marker"}[m]
}

// Config is one run of the lab. Zero fields take the defaults noted.
type Config struct {
	URL          string        // broker, default http://127.0.0.1:6632
	Payments     int           // default 1000
	Amount       int           // per payment, default 100
	Workers      int           // concurrent workers per mode, default 8
	Partitions   int           // partitions of each payments queue, default 2×Workers
	LeaseSeconds int           // the queue's leaseTime, default 1
	CrashPercent int           // deliveries that crash, default 10 (negative = none)
	ModeTimeout  time.Duration // deadline of one mode, default 3 minutes
	// KVReadRate paces mode 3's marker reads below the broker's per-node
	// KV read rate (default 200/s, burst 400). Default 150 per second;
	// negative means unpaced (429s are then retried with backoff).
	KVReadRate float64
	Modes      []Mode       // default AllModes
	RunID      string       // suffix of queue and namespace names; default random
	HTTPClient *http.Client // default: a pooled client for Workers
	Log        io.Writer    // progress lines; nil = silent
}

func (c *Config) fill() error {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:6632"
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.Payments == 0 {
		c.Payments = 1000
	}
	if c.Amount == 0 {
		c.Amount = 100
	}
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.Partitions == 0 {
		c.Partitions = 2 * c.Workers
	}
	if c.LeaseSeconds == 0 {
		c.LeaseSeconds = 1
	}
	if c.CrashPercent == 0 {
		c.CrashPercent = 10
	}
	if c.CrashPercent < 0 {
		c.CrashPercent = 0
	}
	if c.ModeTimeout == 0 {
		c.ModeTimeout = 3 * time.Minute
	}
	if c.KVReadRate == 0 {
		c.KVReadRate = 150
	}
	if len(c.Modes) == 0 {
		c.Modes = AllModes
	}
	if c.RunID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.RunID = fmt.Sprintf("%x-%s", time.Now().Unix(), hex.EncodeToString(b[:]))
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	switch {
	case c.Payments < 1, c.Amount < 1, c.Workers < 1, c.Partitions < 1, c.LeaseSeconds < 1:
		return fmt.Errorf("lab: payments, amount, workers, partitions and lease must be >= 1 (got %d, %d, %d, %d, %d)",
			c.Payments, c.Amount, c.Workers, c.Partitions, c.LeaseSeconds)
	case c.CrashPercent > 50:
		return fmt.Errorf("lab: crash percent %d is above 50", c.CrashPercent)
	}
	for _, m := range c.Modes {
		if m < AtLeastOnce || m > MarkerTransaction {
			return fmt.Errorf("lab: unknown mode %d", int(m))
		}
	}
	return nil
}

// Result is one mode's line of the scoreboard.
type Result struct {
	Mode      Mode
	Queue     string // the payments queue
	Namespace string // the KV namespace of the markers (mode 3)
	Ledger    string // where the ledger is: a queue (mode 3) or the workers' memory

	Sent       int // payments pushed
	Deliveries int // messages handed to a worker, redeliveries included
	Crashes    int // deliveries the crash plan killed
	// CrashesBeforeCommit and CrashesAfterCommit split mode 3's crashes:
	// before the commit nothing happened; after it only the reply was lost.
	CrashesBeforeCommit, CrashesAfterCommit int
	// Replays are mode 3 handler runs that a restarted worker repeated for
	// a delivery whose commit reply it lost; MarkerHits are handler runs
	// that found the marker and charged nothing.
	Replays, MarkerHits int
	// KVPrecondition counts commits whose marker gate was lost;
	// RejectedAcks counts commits refused because the lease was gone.
	KVPrecondition, RejectedAcks int
	// AckRefused counts plain acks the broker refused (the lease ran out).
	AckRefused int

	Charges      int // entries in the ledger
	Charged      int // distinct payments with at least one charge
	Duplicates   int // Charges - Charged
	Lost         int // payments never charged
	LedgerTotal  int // sum of the ledger
	CorrectTotal int // Payments × Amount

	// Markers and MarkersNamingCharge check mode 3's markers against the
	// ledger: every payment has one, and each names a charge in the ledger.
	Markers, MarkersNamingCharge int

	Retries int // requests retried after a 503, 429 or transport error
	Elapsed time.Duration
}

// Scoreboard is the lab's answer: one Result per mode, in run order.
type Scoreboard struct {
	Config  Config
	Results []Result
}

// Result returns the line of mode m, if it ran.
func (s Scoreboard) Result(m Mode) (Result, bool) {
	for _, r := range s.Results {
		if r.Mode == m {
			return r, true
		}
	}
	return Result{}, false
}

// Run runs the configured modes one after the other, each on a fresh queue
// and namespace, and returns the scoreboard. An error means a mode could
// not finish (the broker refused something unexpected, or the deadline
// passed); the scoreboard then holds the modes that did.
func Run(ctx context.Context, cfg Config) (Scoreboard, error) {
	if err := cfg.fill(); err != nil {
		return Scoreboard{}, err
	}
	sb := Scoreboard{Config: cfg}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
			MaxIdleConns:        4*cfg.Workers + 8,
			MaxIdleConnsPerHost: 4*cfg.Workers + 8,
			IdleConnTimeout:     30 * time.Second,
		}
		defer tr.CloseIdleConnections()
		hc = &http.Client{Transport: tr}
	}
	for _, m := range cfg.Modes {
		r, err := runMode(ctx, cfg, hc, m)
		if err != nil {
			return sb, fmt.Errorf("mode %d (%s): %w", int(m), m, err)
		}
		sb.Results = append(sb.Results, r)
	}
	return sb, nil
}

// Crash plan. ------------------------------------------------------------

// crashes reports whether the attempt-th delivery of a payment dies, and
// for mode 3 whether it dies after sending its commit (otherwise before).
// It is a hash of the payment id and the attempt, so the same deliveries
// crash in every mode and every run.
func crashes(paymentID string, attempt, percent int) (crash, afterCommit bool) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s#%d", paymentID, attempt))
	v := binary.BigEndian.Uint64(sum[:8])
	return v%1000 < uint64(percent*10), (v/1000)%2 == 1
}

// CrashPlan lists, for the first attempt of each payment, whether it
// crashes: the deliveries every mode loses on its first try.
func CrashPlan(payments, percent int) []string {
	var out []string
	for i := 1; i <= payments; i++ {
		if c, _ := crashes(paymentID(i), 1, percent); c {
			out = append(out, paymentID(i))
		}
	}
	return out
}

func paymentID(i int) string { return fmt.Sprintf("pay-%04d", i) }

// markerKey is the KV key that says a payment has been charged.
func markerKey(id string) string { return "charged:" + id }

// payment is a message's payload.
type payment struct {
	PaymentID string `json:"paymentId"`
	Amount    int    `json:"amount"`
}

// charge is one ledger entry: a posted charge.
type charge struct {
	PaymentID string `json:"paymentId"`
	ChargeID  string `json:"chargeId"`
	Amount    int    `json:"amount"`
}

// One mode. ---------------------------------------------------------------

// run is the state of one mode while it runs.
type run struct {
	cfg   Config
	mode  Mode
	c     *client
	queue string // payments queue
	group string // the workers' consumer group
	ns    string // KV namespace of the markers
	led   string // ledger queue (mode 3)
	kv    *pacer

	mu       sync.Mutex
	attempts map[string]int  // deliveries per payment
	settled  map[string]bool // payments this mode is finished with
	unsure   map[string]bool // mode 3: commit sent, verdict unknown
	ledger   []charge        // modes 1 and 2: the workers' ledger
	res      Result
	allDone  chan struct{}
	closed   bool
	failure  error
}

func runMode(parent context.Context, cfg Config, hc *http.Client, m Mode) (Result, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, cfg.ModeTimeout)
	defer cancel()
	name := fmt.Sprintf("payments-%s-%s", cfg.RunID, m.short())
	r := &run{
		cfg: cfg, mode: m,
		c:     &client{base: cfg.URL, hc: hc, popWait: 1000, retries: &counter{}},
		queue: name, group: "workers", ns: strings.ToLower(name), led: name + "-ledger",
		kv:       newPacer(cfg.KVReadRate),
		attempts: map[string]int{}, settled: map[string]bool{}, unsure: map[string]bool{},
		allDone: make(chan struct{}),
	}
	r.res = Result{Mode: m, Queue: r.queue, CorrectTotal: cfg.Payments * cfg.Amount, Ledger: "workers' memory"}
	if m == MarkerTransaction {
		r.res.Namespace, r.res.Ledger = r.ns, "queue "+r.led
	}
	fmt.Fprintf(cfg.Log, "mode %d (%s): queue %s, %d partitions, lease %ds, %d workers\n",
		int(m), m, r.queue, cfg.Partitions, cfg.LeaseSeconds, cfg.Workers)

	// A retry limit well above anything the crash plan needs: a lease that
	// runs out spends no retry budget anyway (spec §5.3).
	if err := r.c.configure(ctx, r.queue, cfg.LeaseSeconds, 10); err != nil {
		return r.res, err
	}
	if err := r.pushPayments(ctx); err != nil {
		return r.res, err
	}

	// The workers, and for mode 3 a supervisor that settles payments whose
	// commit verdict was lost, by looking for their markers.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(wctx, w)
		}()
	}
	if m == MarkerTransaction {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.supervise(wctx)
		}()
	}
	select {
	case <-r.allDone:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	r.mu.Lock()
	failure, settled := r.failure, len(r.settled)
	r.mu.Unlock()
	if failure != nil {
		return r.res, failure
	}
	if settled < cfg.Payments {
		return r.res, fmt.Errorf("deadline %v passed with %d of %d payments settled", cfg.ModeTimeout, settled, cfg.Payments)
	}

	// The ledger.
	ledger := r.ledger
	if m == MarkerTransaction {
		var err error
		if ledger, err = r.readLedger(ctx); err != nil {
			return r.res, err
		}
		if err := r.checkMarkers(ctx, ledger); err != nil {
			return r.res, err
		}
	}
	r.tally(ledger)
	r.res.Retries = r.c.retries.get()
	r.res.Elapsed = time.Since(start)
	fmt.Fprintf(cfg.Log, "mode %d (%s): done in %v\n", int(m), m, r.res.Elapsed.Round(time.Millisecond))
	return r.res, nil
}

// pushPayments queues the payments, round-robin over the partitions, in
// requests of up to 100 items. The transactionId is the payment id.
func (r *run) pushPayments(ctx context.Context) error {
	var batch []pushItem
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := r.c.push(ctx, batch)
		batch = batch[:0]
		return err
	}
	for i := 1; i <= r.cfg.Payments; i++ {
		id := paymentID(i)
		batch = append(batch, pushItem{
			Queue: r.queue, Partition: fmt.Sprintf("p%02d", (i-1)%r.cfg.Partitions), TransactionID: id,
			Payload: payment{PaymentID: id, Amount: r.cfg.Amount},
		})
		if len(batch) == 100 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.res.Sent = r.cfg.Payments
	return nil
}

// fail records the first fatal error and stops the mode.
func (r *run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
	}
	r.closeLocked()
}

func (r *run) closeLocked() {
	if !r.closed {
		r.closed = true
		close(r.allDone)
	}
}

// settle marks a payment finished; the mode ends when all are.
func (r *run) settle(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled[id] = true
	delete(r.unsure, id)
	if len(r.settled) == r.cfg.Payments {
		r.closeLocked()
	}
}

// count adds to one of the result's counters under the lock.
func (r *run) count(f func(*Result)) {
	r.mu.Lock()
	f(&r.res)
	r.mu.Unlock()
}

// worker pops one message at a time (batch 1: a failed or abandoned
// delivery gives up the partition's lease, and in a batch every message
// after it would be handled under a dead lease) and handles it.
func (r *run) worker(ctx context.Context, w int) {
	for ctx.Err() == nil {
		if r.mode == MarkerTransaction {
			// A token for the marker read, taken before the pop so that
			// waiting for it never eats into a lease.
			if r.kv.wait(ctx) != nil {
				return
			}
		}
		msgs, err := r.c.pop(ctx, r.queue, r.group, 1)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("worker %d: %w", w, err))
			}
			return
		}
		for _, m := range msgs {
			var p payment
			if err := json.Unmarshal(m.Data, &p); err != nil || p.PaymentID == "" {
				r.fail(fmt.Errorf("worker %d: bad payload %s", w, m.Data))
				return
			}
			r.mu.Lock()
			r.attempts[p.PaymentID]++
			attempt := r.attempts[p.PaymentID]
			r.res.Deliveries++
			r.mu.Unlock()
			var herr error
			switch r.mode {
			case AtLeastOnce:
				herr = r.handleAtLeastOnce(ctx, m, p, attempt)
			case AckFirst:
				herr = r.handleAckFirst(ctx, m, p, attempt)
			case MarkerTransaction:
				herr = r.handleMarker(ctx, m, p, attempt, false)
			}
			if herr != nil {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("worker %d, %s attempt %d: %w", w, p.PaymentID, attempt, herr))
				}
				return
			}
		}
	}
}

// post appends a charge to the workers' ledger (modes 1 and 2).
func (r *run) post(p payment, attempt int) {
	r.mu.Lock()
	r.ledger = append(r.ledger, charge{PaymentID: p.PaymentID, ChargeID: fmt.Sprintf("ch_%s_%d", p.PaymentID, attempt), Amount: p.Amount})
	r.mu.Unlock()
}

// Mode 1: charge, then ack. A crash in between leaves the message unacked;
// its lease runs out and it is delivered, and charged, again.
func (r *run) handleAtLeastOnce(ctx context.Context, m message, p payment, attempt int) error {
	r.post(p, attempt)
	if crash, _ := crashes(p.PaymentID, attempt, r.cfg.CrashPercent); crash {
		r.count(func(s *Result) { s.Crashes++ })
		return nil // the worker dies: no ack, the lease is abandoned
	}
	ok, _, err := r.c.ack(ctx, m, r.group)
	if err != nil {
		return err
	}
	if !ok {
		// The lease ran out first: the message comes back and is charged
		// again, which is exactly this mode's flaw.
		r.count(func(s *Result) { s.AckRefused++ })
		return nil
	}
	r.settle(p.PaymentID)
	return nil
}

// Mode 2: ack, then charge. A crash in between loses the payment: the
// broker was told it is done and never brings it back.
func (r *run) handleAckFirst(ctx context.Context, m message, p payment, attempt int) error {
	ok, _, err := r.c.ack(ctx, m, r.group)
	if err != nil {
		return err
	}
	if !ok {
		r.count(func(s *Result) { s.AckRefused++ })
		return nil // not acked, not charged: it comes back
	}
	r.settle(p.PaymentID)
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
func (r *run) handleMarker(ctx context.Context, m message, p payment, attempt int, replay bool) error {
	// 1. Was this payment charged already? `found` is its own field
	//    because null is a value one can store.
	found, _, err := r.c.kvGet(ctx, r.ns, markerKey(p.PaymentID))
	if err != nil {
		return err
	}
	if found {
		// Nothing to charge, but the message still has to leave the
		// group's cursor. After a lost reply the commit already acked it,
		// and the broker answers the repeated ack as a no-op success.
		r.count(func(s *Result) { s.MarkerHits++ })
		ok, _, err := r.c.ack(ctx, m, r.group)
		if err != nil {
			return err
		}
		if ok {
			r.settle(p.PaymentID)
		} else {
			r.count(func(s *Result) { s.AckRefused++ })
		}
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
	body := map[string]any{
		"operations": []any{
			map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
				"consumerGroup": r.group, "leaseId": m.LeaseID, "status": "completed"},
			map[string]any{"type": "push", "items": []any{map[string]any{
				"queue": r.led, "partition": "ledger", "transactionId": "ledger-" + chargeID,
				"payload": charge{PaymentID: p.PaymentID, ChargeID: chargeID, Amount: p.Amount},
			}}},
		},
		// kv is a key of the ROOT, beside operations. required turns the
		// putIfAbsent into a gate: if the marker exists, the whole
		// transaction rolls back, ack and charge included.
		"kv": []any{map[string]any{
			"op": "putIfAbsent", "ns": r.ns, "key": markerKey(p.PaymentID),
			"value": map[string]any{"chargeId": chargeID, "amount": p.Amount}, "ttlSeconds": 3600, "required": true,
		}},
	}

	if crash && afterCommit {
		// Dies right after sending the commit: the broker answers, nobody
		// reads it. The restarted worker replays the delivery from the top.
		r.mu.Lock()
		r.res.Crashes++
		r.res.CrashesAfterCommit++
		r.unsure[p.PaymentID] = true
		r.mu.Unlock()
		if err := r.c.sendAndDropReply(ctx, "POST", "/api/v1/transaction", body); err != nil {
			return err
		}
		r.count(func(s *Result) { s.Replays++ })
		return r.handleMarker(ctx, m, p, attempt, true)
	}

	v, err := r.c.commit(ctx, body)
	if err != nil {
		return err
	}
	switch {
	case v.Success:
		r.settle(p.PaymentID)
	case v.Reason == "kv_precondition":
		// Another delivery of this payment committed first. Nothing of this
		// transaction was written; the message is acked on its own.
		r.count(func(s *Result) { s.KVPrecondition++ })
		ok, _, err := r.c.ack(ctx, m, r.group)
		if err != nil {
			return err
		}
		if ok {
			r.settle(p.PaymentID)
		}
	case v.Reason == "rejected_ack", v.Reason == "duplicate":
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
	default:
		return fmt.Errorf("commit refused: reason %q, error %q", v.Reason, v.Error)
	}
	return nil
}

// supervise settles mode 3 payments whose verdict a worker could not read,
// once their marker shows the commit landed. Marker and ack are one log
// entry, so a marker means the message is acked.
func (r *run) supervise(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		var keys []string
		for id := range r.unsure {
			if !r.settled[id] {
				keys = append(keys, markerKey(id))
			}
		}
		r.mu.Unlock()
		sort.Strings(keys)
		for len(keys) > 0 {
			n := min(len(keys), 200)
			if r.kv.wait(ctx) != nil {
				return
			}
			rows, _, err := r.c.kvGetMany(ctx, r.ns, keys[:n])
			if err != nil {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("supervisor: %w", err))
				}
				return
			}
			for _, row := range rows {
				r.settle(strings.TrimPrefix(row.Key, "charged:"))
			}
			keys = keys[n:]
		}
	}
}

// readLedger reads the whole ledger queue back with a fresh consumer group
// (subscriptionMode=all), acking as it goes, until it has every message the
// queue holds.
func (r *run) readLedger(ctx context.Context) ([]charge, error) {
	want, err := r.c.queueTotal(ctx, r.led)
	if err != nil {
		return nil, err
	}
	group := "auditor"
	var out []charge
	for len(out) < want {
		if ctx.Err() != nil {
			return out, fmt.Errorf("ledger read-back: %d of %d entries before the deadline", len(out), want)
		}
		msgs, err := r.c.pop(ctx, r.led, group, 500)
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			var ch charge
			if err := json.Unmarshal(m.Data, &ch); err != nil {
				return out, fmt.Errorf("ledger entry %s: %v", m.Data, err)
			}
			out = append(out, ch)
		}
		if len(msgs) > 0 {
			if err := r.c.ackAll(ctx, msgs, group); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// checkMarkers reads every payment's marker and checks it names a charge
// in the ledger.
func (r *run) checkMarkers(ctx context.Context, ledger []charge) error {
	charges := map[string]bool{}
	for _, ch := range ledger {
		charges[ch.ChargeID] = true
	}
	var keys []string
	for i := 1; i <= r.cfg.Payments; i++ {
		keys = append(keys, markerKey(paymentID(i)))
	}
	for len(keys) > 0 {
		n := min(len(keys), 200)
		if err := r.kv.wait(ctx); err != nil {
			return err
		}
		rows, _, err := r.c.kvGetMany(ctx, r.ns, keys[:n])
		if err != nil {
			return err
		}
		for _, row := range rows {
			r.res.Markers++
			var v struct {
				ChargeID string `json:"chargeId"`
			}
			if json.Unmarshal(row.Value, &v) == nil && charges[v.ChargeID] {
				r.res.MarkersNamingCharge++
			}
		}
		keys = keys[n:]
	}
	return nil
}

// tally fills the ledger columns of the result.
func (r *run) tally(ledger []charge) {
	per := map[string]int{}
	for _, ch := range ledger {
		per[ch.PaymentID]++
		r.res.LedgerTotal += ch.Amount
	}
	r.res.Charges = len(ledger)
	r.res.Charged = len(per)
	r.res.Duplicates = r.res.Charges - r.res.Charged
	for i := 1; i <= r.cfg.Payments; i++ {
		if per[paymentID(i)] == 0 {
			r.res.Lost++
		}
	}
}

// Check returns an error naming every way the scoreboard differs from what
// the lab is meant to show: duplicates without the marker, losses with ack
// first, and neither with the marker transaction.
func (s Scoreboard) Check() error {
	var errs []error
	for _, r := range s.Results {
		switch r.Mode {
		case AtLeastOnce:
			if r.Duplicates == 0 {
				errs = append(errs, errors.New("mode 1 (at-least-once) shows no duplicate charge"))
			}
			if r.Lost != 0 {
				errs = append(errs, fmt.Errorf("mode 1 (at-least-once) lost %d payments", r.Lost))
			}
		case AckFirst:
			if r.Lost == 0 {
				errs = append(errs, errors.New("mode 2 (ack first) lost no payment"))
			}
			if r.Duplicates != 0 {
				errs = append(errs, fmt.Errorf("mode 2 (ack first) charged %d payments twice", r.Duplicates))
			}
		case MarkerTransaction:
			if r.Duplicates != 0 || r.Lost != 0 || r.LedgerTotal != r.CorrectTotal {
				errs = append(errs, fmt.Errorf("mode 3 (marker + ack transaction): %d duplicates, %d lost, ledger %d (want 0, 0, %d)",
					r.Duplicates, r.Lost, r.LedgerTotal, r.CorrectTotal))
			}
			if r.Markers != r.Sent || r.MarkersNamingCharge != r.Sent {
				errs = append(errs, fmt.Errorf("mode 3: %d markers, %d naming a ledger charge (want %d)",
					r.Markers, r.MarkersNamingCharge, r.Sent))
			}
		}
	}
	return errors.Join(errs...)
}
