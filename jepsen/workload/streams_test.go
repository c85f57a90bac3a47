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
