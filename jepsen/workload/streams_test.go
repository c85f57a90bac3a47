package workload

import "testing"

// The streams checker: a window counted short is lost messages, one counted
// over what was pushed (beyond the unknown pushes) is duplicates, a window
// split over several emits is fine when they add up.
func TestCheckStreams(t *testing.T) {
	pushed := map[string]int{"p0@0": 10, "p0@1": 10, "p1@0": 10}
	maybe := map[string]int{"p1@0": 1}
	ok := checkStreams(pushed, maybe, map[string]int{"p0@0": 10, "p0@1": 10, "p1@0": 11}, 5)
	if !ok.OK() {
		t.Fatalf("exact counts (one unknown push counted): %+v", ok)
	}
	bad := checkStreams(pushed, maybe, map[string]int{"p0@0": 20, "p0@1": 7, "p1@0": 10, "p9@3": 1}, 5)
	if bad.Lost != 3 || bad.Duplicated != 11 || len(bad.Violations) != 3 {
		t.Fatalf("double, short and phantom windows: %+v", bad)
	}
}

// A flush before the end closes only a window that counts every message
// that may have been pushed into it: one still missing a message (a run
// whose worker crashed comes back after its lease) may be updated by a
// whole main-loop cycle between the flush's read and its commit.
func TestStreamsFlushesOnlyCompleteWindows(t *testing.T) {
	s := newStreams()
	s.done["p1"] = 22 // windows 0..21 fully pushed
	s.pushed["p1@21"], s.maybe["p1@21"] = 9, 1
	s.pushed["p1@20"] = 10
	s.pushed["p1@22"] = 4
	row := func(w, count int) streamRow {
		var r streamRow
		r.Value.Partition, r.Value.WindowEnd, r.Value.Count = "p1", w, count
		return r
	}
	for _, c := range []struct {
		row  streamRow
		want bool
	}{
		{row(20, 10), true},
		{row(20, 8), false}, // two messages of it not folded yet
		{row(21, 9), false}, // the unknown push may have landed
		{row(21, 10), true}, // it did, and is counted
		{row(22, 4), false}, // not fully pushed
	} {
		if got := s.complete(c.row); got != c.want {
			t.Errorf("window %d with count %d: complete %v, want %v", c.row.Value.WindowEnd, c.row.Value.Count, got, c.want)
		}
	}
}
