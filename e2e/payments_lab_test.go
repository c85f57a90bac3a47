package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/queen-node/queen-node/examples/payments/lab"
)

// TestPaymentsLab runs the payments lab (examples/payments) against a fresh
// node with 200 payments: the same crash plan in four modes must show
// duplicates when the charge precedes the ack, losses when the ack precedes
// the charge, and neither when the marker, the ack and the charge commit in
// one transaction, one payment at a time or ten.
func TestPaymentsLab(t *testing.T) {
	n := startNode(t, nodeOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var progress bytes.Buffer
	start := time.Now()
	sb, err := lab.Run(ctx, lab.Config{
		URL:          "http://" + n.Addrs().HTTP,
		Payments:     200,
		Amount:       100,
		Workers:      8,
		Partitions:   16,
		LeaseSeconds: 1,
		ModeTimeout:  30 * time.Second,
		HTTPClient:   n.client,
		Log:          &progress,
	})
	var out bytes.Buffer
	sb.Print(&out)
	t.Logf("lab ran in %v\n%s\n%s", time.Since(start).Round(time.Millisecond), progress.String(), out.String())
	if err != nil {
		t.Fatalf("lab.Run: %v", err)
	}
	n.requireRunning()

	if len(sb.Results) != 4 {
		t.Fatalf("%d mode results, want 4", len(sb.Results))
	}
	plan := len(lab.CrashPlan(200, 10))
	if plan == 0 {
		t.Fatal("the crash plan kills no first delivery of 200 payments")
	}
	for _, r := range sb.Results {
		if r.Sent != 200 {
			t.Errorf("mode %d: sent %d, want 200", r.Mode, r.Sent)
		}
		if r.Deliveries < r.Sent {
			t.Errorf("mode %d: %d deliveries for %d payments", r.Mode, r.Deliveries, r.Sent)
		}
	}

	// Mode 1 checks the crash and the ack only after charging, so every
	// first delivery the plan kills crashes here, and every delivery that
	// did not end in an ack (a crash, or an ack refused because the lease
	// ran out) is delivered and charged again.
	r1, _ := sb.Result(lab.AtLeastOnce)
	if r1.Duplicates == 0 || r1.Lost != 0 || r1.LedgerTotal <= r1.CorrectTotal {
		t.Errorf("mode 1 (charge, then ack): %d duplicates, %d lost, ledger %d; want >0 duplicates, 0 lost, ledger above %d",
			r1.Duplicates, r1.Lost, r1.LedgerTotal, r1.CorrectTotal)
	}
	if r1.Crashes < plan {
		t.Errorf("mode 1: %d crashes; the plan kills %d first deliveries", r1.Crashes, plan)
	}
	if r1.Duplicates != r1.Crashes+r1.AckRefused || r1.Deliveries != r1.Sent+r1.Duplicates {
		t.Errorf("mode 1: %d duplicates, %d deliveries after %d crashes and %d refused acks; want every unacked delivery charged again",
			r1.Duplicates, r1.Deliveries, r1.Crashes, r1.AckRefused)
	}

	// Mode 2 crashes only after an ack went through: each crash is a
	// payment the broker will never bring back.
	r2, _ := sb.Result(lab.AckFirst)
	if r2.Lost == 0 || r2.Duplicates != 0 || r2.LedgerTotal >= r2.CorrectTotal {
		t.Errorf("mode 2 (ack, then charge): %d duplicates, %d lost, ledger %d; want 0 duplicates, >0 lost, ledger below %d",
			r2.Duplicates, r2.Lost, r2.LedgerTotal, r2.CorrectTotal)
	}
	if r2.Lost != r2.Crashes || r2.Charges != r2.Sent-r2.Crashes {
		t.Errorf("mode 2: %d lost and %d charges after %d crashes; want each crash to lose exactly its payment", r2.Lost, r2.Charges, r2.Crashes)
	}
	if r2.AckRefused == 0 && r2.Crashes != plan {
		t.Errorf("mode 2: %d crashes with no refused ack; the plan kills %d first deliveries", r2.Crashes, plan)
	}

	r3, _ := sb.Result(lab.MarkerTransaction)
	// Mode 3: the same crash plan, and neither.
	if r3.Crashes < plan {
		t.Errorf("mode 3: %d crashes; the plan kills %d first deliveries", r3.Crashes, plan)
	}
	if r3.Duplicates != 0 || r3.Lost != 0 || r3.Charges != 200 || r3.LedgerTotal != r3.CorrectTotal {
		t.Errorf("mode 3 (marker + ack transaction): %d charges, %d duplicates, %d lost, ledger %d; want 200, 0, 0, %d",
			r3.Charges, r3.Duplicates, r3.Lost, r3.LedgerTotal, r3.CorrectTotal)
	}
	if r3.CrashesBeforeCommit == 0 || r3.CrashesAfterCommit == 0 {
		t.Errorf("mode 3: crashes %d before and %d after the commit; the plan should give both", r3.CrashesBeforeCommit, r3.CrashesAfterCommit)
	}
	if r3.Deliveries <= r3.Sent {
		t.Errorf("mode 3: %d deliveries for %d payments; crashes before the commit must be redelivered", r3.Deliveries, r3.Sent)
	}
	if r3.Replays != r3.CrashesAfterCommit || r3.MarkerHits < r3.CrashesAfterCommit {
		t.Errorf("mode 3: %d replays and %d marker hits after %d lost commit replies; each replay must find the marker",
			r3.Replays, r3.MarkerHits, r3.CrashesAfterCommit)
	}
	if r3.Markers != 200 || r3.MarkersNamingCharge != 200 {
		t.Errorf("mode 3: %d markers, %d naming a ledger charge; want 200 and 200", r3.Markers, r3.MarkersNamingCharge)
	}
	// Mode 4: the same in batches of 10 through the client's OnceConsumer,
	// with a lost marker race and a lost lease besides the crash plan.
	r4, _ := sb.Result(lab.BatchedMarker)
	if r4.Duplicates != 0 || r4.Lost != 0 || r4.Charges != 200 || r4.LedgerTotal != r4.CorrectTotal {
		t.Errorf("mode 4 (batched): %d charges, %d duplicates, %d lost, ledger %d; want 200, 0, 0, %d",
			r4.Charges, r4.Duplicates, r4.Lost, r4.LedgerTotal, r4.CorrectTotal)
	}
	if r4.CrashesBeforeCommit == 0 || r4.CrashesAfterCommit == 0 || r4.KVPrecondition == 0 || r4.RejectedAcks == 0 {
		t.Errorf("mode 4: %d crashes before and %d after the commit, %d lost races, %d lost leases; want each",
			r4.CrashesBeforeCommit, r4.CrashesAfterCommit, r4.KVPrecondition, r4.RejectedAcks)
	}
	if r4.Markers != 200 || r4.MarkersNamingCharge != 200 {
		t.Errorf("mode 4: %d markers, %d naming a ledger charge; want 200 and 200", r4.Markers, r4.MarkersNamingCharge)
	}
	if err := sb.Check(); err != nil {
		t.Error(err)
	}
}
