package damage

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func count(t *testing.T, r *Report, where string) float64 {
	t.Helper()
	var m dto.Metric
	if err := r.found.WithLabelValues(where).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestReportKeepsTheFirstFindingAndCountsAll(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(nil, reg)
	if _, _, ok := r.Damaged(); ok {
		t.Fatal("a new report says damaged")
	}
	r.Note(MessageFiles, errors.New("record of seq 3 fails its CRC-32C"))
	r.Note(RaftLog, errors.New("log entry 9 fails its checksum"))
	r.Note(MessageFiles, errors.New("again"))
	first, n, ok := r.Damaged()
	if !ok || n != 3 || first.Where != MessageFiles || !strings.Contains(first.Reason, "seq 3") || first.At.IsZero() {
		t.Fatalf("Damaged() = %+v, %d, %v", first, n, ok)
	}
	if got := count(t, r, MessageFiles); got != 2 {
		t.Fatalf("message_files count %v, want 2", got)
	}
	if got := count(t, r, StateFile); got != 0 {
		t.Fatalf("state_file count %v, want 0", got)
	}
	var nilReport *Report
	nilReport.Note(StateFile, errors.New("x")) // a node without a report ignores it
}

func TestOnFirstIsCalledOnceForTheFirstFinding(t *testing.T) {
	r := New(nil, nil)
	got := make(chan Finding, 4)
	r.OnFirst(func(f Finding) { got <- f })
	r.Note(RaftLog, errors.New("entry 3"))
	r.Note(RaftLog, errors.New("entry 4"))
	if f := <-got; f.Reason != "entry 3" {
		t.Fatalf("OnFirst got %+v", f)
	}
	late := make(chan Finding, 1)
	r.OnFirst(func(f Finding) { late <- f }) // set after the damage: called at once
	if f := <-late; f.Reason != "entry 3" {
		t.Fatalf("a late OnFirst got %+v", f)
	}
	select {
	case f := <-got:
		t.Fatalf("the first OnFirst was called again: %+v", f)
	default:
	}
}

// Once the damaged files are gone the report is clear, the counter keeps
// counting, and the next finding is a first one again.
func TestAClearedReportTakesAFirstFindingAgain(t *testing.T) {
	r := New(nil, nil)
	got := make(chan Finding, 4)
	r.OnFirst(func(f Finding) { got <- f })
	r.Note(StateFile, errors.New("digest differs"))
	<-got
	r.Clear()
	if _, _, ok := r.Damaged(); ok {
		t.Fatal("a cleared report says damaged")
	}
	r.Note(MessageFiles, errors.New("seq 7"))
	if f := <-got; f.Reason != "seq 7" {
		t.Fatalf("OnFirst after the clear got %+v", f)
	}
	if first, n, _ := r.Damaged(); n != 1 || first.Where != MessageFiles {
		t.Fatalf("Damaged() after the clear: %+v %d", first, n)
	}
	if c := count(t, r, StateFile); c != 1 {
		t.Fatalf("the counter forgot: %v", c)
	}
}
