package saga

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

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
