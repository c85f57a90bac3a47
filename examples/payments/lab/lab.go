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
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	queen "github.com/queen-node/queen-node/client"
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
	// BatchedMarker commits the markers, acks and charges of a whole batch
	// in one transaction (the Go client's OnceConsumer).
	BatchedMarker Mode = 4
)

// AllModes is the order the lab runs them in.
var AllModes = []Mode{AtLeastOnce, AckFirst, MarkerTransaction, BatchedMarker}

func (m Mode) String() string {
	switch m {
	case AtLeastOnce:
		return "at-least-once, no marker"
	case AckFirst:
		return "ack first"
	case MarkerTransaction:
		return "marker + ack transaction"
	case BatchedMarker:
		return "batched marker + ack"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

func (m Mode) short() string {
	return [...]string{"", "alo", "ackfirst", "marker", "batched"}[m]
}

// Config is one run of the lab. Zero fields take the defaults noted.
type Config struct {
	URL          string        // broker, default http://127.0.0.1:6632
	Payments     int           // default 1000
	Amount       int           // per payment, default 100
	Workers      int           // concurrent workers per mode, default 8
	Partitions   int           // partitions of each payments queue, default 2×Workers
	LeaseSeconds int           // the queue's leaseTime, default 1
	Batch        int           // payments per batch in mode 4, default 10
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
	if c.Batch == 0 {
		c.Batch = 10
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
		if m < AtLeastOnce || m > BatchedMarker {
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

	Retries int // requests retried after a 503, 429, 500 or transport error
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
	b, err := dial(cfg.URL, hc)
	if err != nil {
		return sb, err
	}
	defer b.close()
	for _, m := range cfg.Modes {
		r, err := runMode(ctx, cfg, b, m)
		if err != nil {
			return sb, fmt.Errorf("mode %d (%s): %w", int(m), m, err)
		}
		sb.Results = append(sb.Results, r)
	}
	return sb, nil
}

// broker is the lab's way to the broker: the Go client (package queen) over
// the HTTP API, and a second one for the worker that crashes right after
// sending its commit.
type broker struct {
	c *queen.Client
	// crash sends once and never retries, as a process that dies right
	// after sending would.
	crash   *queen.Client
	retries atomic.Int64 // requests c retried, over all modes
}

// dial makes the clients. c retries a 503, a 429, a 500 or a network error
// with backoff (25 ms doubling to 1 s, with jitter) until the mode's
// deadline: every request the lab sends is safe to repeat (spec §1.2), as
// a push carries its transactionId and an ack or a commit its lease. Each
// send waits at most 10 s for its answer (a pop: its long-poll more).
func dial(url string, hc *http.Client) (*broker, error) {
	b := &broker{}
	var err error
	b.c, err = queen.New(url, queen.WithHTTPClient(hc), queen.WithRetry(queen.RetryPolicy{
		MaxAttempts: -1, BaseDelay: 25 * time.Millisecond, MaxDelay: time.Second, RateLimited: true,
		AttemptTimeout: 10 * time.Second, OnRetry: func(error) { b.retries.Add(1) },
	}))
	if err != nil {
		return nil, err
	}
	b.crash, err = queen.New(url, queen.WithHTTPClient(hc), queen.WithRetry(queen.RetryPolicy{MaxAttempts: 1, AttemptTimeout: 10 * time.Second}))
	if err != nil {
		b.c.Close()
		return nil, err
	}
	return b, nil
}

func (b *broker) close() {
	b.c.Close()
	b.crash.Close()
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

// marker is the value of a payment's "already charged" marker (mode 3).
type marker struct {
	ChargeID string `json:"chargeId"`
	Amount   int    `json:"amount"`
}

// charge is one ledger entry: a posted charge.
type charge struct {
	PaymentID string `json:"paymentId"`
	ChargeID  string `json:"chargeId"`
	Amount    int    `json:"amount"`
}
