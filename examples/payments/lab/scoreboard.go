package lab

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const rule = "=============================================================================="

// money formats n with thousands separators: 110700 -> "110,700".
func money(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

var headlines = map[Mode][2]string{
	AtLeastOnce: {
		"Mode 1: at-least-once, no marker. Charge, then ack. A crash before the",
		"        ack means the broker redelivers, and the charge is posted twice.",
	},
	AckFirst: {
		"Mode 2: ack first. Ack, then charge. A crash after the ack loses the",
		"        payment: the broker was told it is done and never brings it back.",
	},
	MarkerTransaction: {
		"Mode 3: marker + ack in ONE transaction. Same crashes, same redeliveries;",
		"        the marker, the ack and the charge commit together or not at all.",
	},
	BatchedMarker: {
		"Mode 4: a batch's markers, acks and charges in ONE transaction. A lost race",
		"        or a lost lease rolls the batch back; it commits again, charging nothing twice.",
	},
}

// PrintMode writes one mode's section.
func (s Scoreboard) PrintMode(w io.Writer, r Result) {
	c := s.Config
	h := headlines[r.Mode]
	fmt.Fprintf(w, "%s\n%s\n%s\n%s\n", rule, h[0], h[1], rule)
	line := func(label string, v any) { fmt.Fprintf(w, "  %-36s %v\n", label+":", v) }
	line("queue", fmt.Sprintf("%s (%d partitions, leaseTime %ds, %d workers)", r.Queue, c.Partitions, c.LeaseSeconds, c.Workers))
	if r.Namespace != "" {
		line("marker namespace", r.Namespace)
	}
	line("ledger", r.Ledger)
	line("messages sent", r.Sent)
	line("deliveries handled (with retries)", r.Deliveries)
	switch r.Mode {
	case MarkerTransaction:
		line("crashes", fmt.Sprintf("%d (%d before the commit, %d right after sending it)",
			r.Crashes, r.CrashesBeforeCommit, r.CrashesAfterCommit))
		line("replays after a lost reply", fmt.Sprintf("%d (marker found, nothing charged: %d)", r.Replays, r.MarkerHits))
		line("commits refused", fmt.Sprintf("%d kv_precondition, %d rejected_ack", r.KVPrecondition, r.RejectedAcks))
	case BatchedMarker:
		line("batch size", s.Config.Batch)
		line("crashes", fmt.Sprintf("%d (%d before the commit: batch abandoned, %d right after sending it)",
			r.Crashes, r.CrashesBeforeCommit, r.CrashesAfterCommit))
		line("deliveries that found their marker", r.MarkerHits)
		line("batches committed again", fmt.Sprintf("%d payments lost a marker race, %d lost their lease (charged, acked on redelivery)",
			r.KVPrecondition, r.RejectedAcks))
	case AtLeastOnce:
		line("crashes (charged, never acked)", r.Crashes)
	case AckFirst:
		line("crashes (acked, never charged)", r.Crashes)
	}
	if r.AckRefused > 0 {
		line("acks refused (lease ran out)", r.AckRefused)
	}
	line("charges in the ledger", r.Charges)
	line("duplicate charges", r.Duplicates)
	line("lost charges (never posted)", r.Lost)
	line("ledger total", fmt.Sprintf("%s  (correct is %s)", money(r.LedgerTotal), money(r.CorrectTotal)))
	switch d := r.LedgerTotal - r.CorrectTotal; {
	case d > 0:
		line("overcharged by", money(d))
	case d < 0:
		line("undercharged by", money(-d))
	}
	if r.Mode.marks() {
		line("markers", fmt.Sprintf("%d, each naming a charge in the ledger: %d", r.Markers, r.MarkersNamingCharge))
	}
	if r.Retries > 0 {
		line("requests retried (503/429/network)", r.Retries)
	}
	line("took", r.Elapsed.Round(10e6))
	fmt.Fprintln(w)
}

// PrintTable writes the three-way scoreboard.
func (s Scoreboard) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "%s\nScoreboard: %d payments of %d, about %d%% of deliveries crash\n%s\n",
		rule, s.Config.Payments, s.Config.Amount, s.Config.CrashPercent, rule)
	fmt.Fprintf(w, "  %-28s %6s %11s %8s %11s %5s %13s\n", "mode", "sent", "deliveries", "charges", "duplicates", "lost", "ledger total")
	for _, r := range s.Results {
		fmt.Fprintf(w, "  %-28s %6d %11d %8d %11d %5d %13s\n", fmt.Sprintf("%d %s", int(r.Mode), r.Mode),
			r.Sent, r.Deliveries, r.Charges, r.Duplicates, r.Lost, money(r.LedgerTotal))
	}
	fmt.Fprintf(w, "  %-28s %6s %11s %8s %11s %5s %13s\n", "correct", "", "", "", "0", "0", money(s.Config.Payments*s.Config.Amount))
	fmt.Fprintln(w)
}

// Print writes every mode's section, then the scoreboard, then the number
// to carry.
func (s Scoreboard) Print(w io.Writer) {
	for _, r := range s.Results {
		s.PrintMode(w, r)
	}
	s.PrintTable(w)
	r1, ok1 := s.Result(AtLeastOnce)
	r2, ok2 := s.Result(AckFirst)
	r3, ok3 := s.Result(MarkerTransaction)
	if !ok1 || !ok2 || !ok3 {
		return
	}
	fmt.Fprintf(w, "%s\nThe number to carry\n%s\n", rule, rule)
	fmt.Fprintf(w, "  Same %d payments, same crash plan, a real broker redelivering.\n", s.Config.Payments)
	fmt.Fprintf(w, "  Charge, then ack:        %d duplicate charges, ledger %s (too high).\n", r1.Duplicates, money(r1.LedgerTotal))
	fmt.Fprintf(w, "  Ack, then charge:        %d lost charges, ledger %s (too low).\n", r2.Lost, money(r2.LedgerTotal))
	fmt.Fprintf(w, "  Marker + ack + charge:   %d duplicates, %d lost, ledger %s (%s).\n",
		r3.Duplicates, r3.Lost, money(r3.LedgerTotal), map[bool]string{true: "exactly right", false: "WRONG"}[r3.LedgerTotal == r3.CorrectTotal && r3.Duplicates == 0 && r3.Lost == 0])
	if r4, ok := s.Result(BatchedMarker); ok {
		fmt.Fprintf(w, "  The same, %d at a time:   %d duplicates, %d lost, ledger %s (%s).\n", s.Config.Batch,
			r4.Duplicates, r4.Lost, money(r4.LedgerTotal), map[bool]string{true: "exactly right", false: "WRONG"}[r4.LedgerTotal == r4.CorrectTotal && r4.Duplicates == 0 && r4.Lost == 0])
	}
	fmt.Fprintf(w, "  Delivery stayed at-least-once (%d deliveries for %d payments);\n", r3.Deliveries, r3.Sent)
	fmt.Fprintf(w, "  the effect became exactly-once because it commits with the ack.\n")
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
		case MarkerTransaction, BatchedMarker:
			if r.Duplicates != 0 || r.Lost != 0 || r.LedgerTotal != r.CorrectTotal {
				errs = append(errs, fmt.Errorf("mode %d (%s): %d duplicates, %d lost, ledger %d (want 0, 0, %d)",
					int(r.Mode), r.Mode, r.Duplicates, r.Lost, r.LedgerTotal, r.CorrectTotal))
			}
			if r.Markers != r.Sent || r.MarkersNamingCharge != r.Sent {
				errs = append(errs, fmt.Errorf("mode %d: %d markers, %d naming a ledger charge (want %d)",
					int(r.Mode), r.Markers, r.MarkersNamingCharge, r.Sent))
			}
			if r.Mode == BatchedMarker && r.Sent >= slowPayment && (r.KVPrecondition == 0 || r.RejectedAcks == 0) {
				errs = append(errs, fmt.Errorf("mode 4: %d lost marker races and %d lost leases; the rival's and the slow payment give one each",
					r.KVPrecondition, r.RejectedAcks))
			}
		}
	}
	return errors.Join(errs...)
}
