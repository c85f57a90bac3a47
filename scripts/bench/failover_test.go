package main

import (
	"testing"
	"time"
)

// A fault's cost: pushes every 20 ms taking 2 ms before the fault at 1 s;
// after it, 300 ms of failures, then one slow push of 40 ms (over 10x the
// 2 ms p99), then fast ones again. The window runs from the first failed
// push's send to the slow one's answer; an isolated slow push later is a
// window of its own, shorter.
func TestClientCost(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ok := verdict{good: 1}
	var recs []pushRec
	for d := time.Duration(0); d < time.Second; d += 20 * time.Millisecond {
		recs = append(recs, pushRec{sent: at(d), done: at(d + 2*time.Millisecond), v: ok})
	}
	fault := at(time.Second)
	for d := time.Second; d < 1300*time.Millisecond; d += 20 * time.Millisecond {
		recs = append(recs, pushRec{sent: at(d), done: at(d + time.Millisecond), v: failed("no_leader", "")})
	}
	recs = append(recs, pushRec{sent: at(1300 * time.Millisecond), done: at(1340 * time.Millisecond), v: ok})
	for d := 1320 * time.Millisecond; d < 2*time.Second; d += 20 * time.Millisecond {
		recs = append(recs, pushRec{sent: at(d), done: at(d + 3*time.Millisecond), v: ok})
	}
	recs = append(recs, pushRec{sent: at(2 * time.Second), done: at(2*time.Second + 50*time.Millisecond), v: ok})
	recs = append(recs, pushRec{sent: at(-500 * time.Millisecond), done: at(400 * time.Millisecond), v: ok}) // a slow start over a second before: not the baseline
	c := clientCost(recs, fault)
	if c.before != 2*time.Millisecond {
		t.Fatalf("p99 before %v, want 2ms", c.before)
	}
	if c.window != 340*time.Millisecond {
		t.Fatalf("window %v, want 340ms (1.000 s to 1.340 s)", c.window)
	}
	if c.during != 40*time.Millisecond || c.after != 50*time.Millisecond {
		t.Fatalf("p99 during %v (want 40ms), after %v (want 50ms)", c.during, c.after)
	}
}
