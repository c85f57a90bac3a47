package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

const promText = `# HELP queen_timers_fired_total Timers handled.
# TYPE queen_timers_fired_total counter
queen_timers_fired_total{result="dead_letter"} 0
queen_timers_fired_total{result="fired"} 6000
go_memstats_heap_alloc_bytes 1.5e+06
queen_timers_lateness_seconds_bucket{le="0.001"} 0
queen_timers_lateness_seconds_bucket{le="0.002"} 10
queen_timers_lateness_seconds_bucket{le="0.004"} 50
queen_timers_lateness_seconds_bucket{le="0.008"} 90
queen_timers_lateness_seconds_bucket{le="+Inf"} 100
queen_timers_lateness_seconds_sum 0.4
queen_timers_lateness_seconds_count 100
odd_metric{path="/a b"} 7 1700000000
`

func TestParseProm(t *testing.T) {
	p, err := parseProm(strings.NewReader(promText))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		`queen_timers_fired_total{result="fired"}`: 6000,
		"go_memstats_heap_alloc_bytes":             1.5e6,
		`odd_metric{path="/a b"}`:                  7,
		"queen_timers_lateness_seconds_count":      100,
	} {
		if got, ok := p[k]; !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, want)
		}
	}
	if got := p.sumPrefix("queen_timers_fired_total"); got != 6000 {
		t.Errorf("sumPrefix = %v", got)
	}
	h := p.histogram("queen_timers_lateness_seconds")
	if len(h) != 5 || h[0].le != 0.001 || !math.IsInf(h[4].le, 1) || h[4].count != 100 {
		t.Fatalf("histogram = %+v", h)
	}
}

func TestHistQuantile(t *testing.T) {
	bs := []bucket{{0.001, 0}, {0.002, 10}, {0.004, 50}, {0.008, 90}, {math.Inf(1), 100}}
	cases := []struct{ q, want float64 }{
		{0.05, 0.0015}, // halfway through (0.001, 0.002]
		{0.5, 0.004},   // the top of (0.002, 0.004]
		{0.7, 0.006},   // halfway through (0.004, 0.008]
		{0.99, 0.008},  // in +Inf: the highest finite bound
	}
	for _, c := range cases {
		if got := histQuantile(bs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q=%v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := histQuantile([]bucket{{1, 0}, {math.Inf(1), 0}}, 0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram: %v, want NaN", got)
	}
	if got := histQuantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("no buckets: %v, want NaN", got)
	}
	// From zero inside the first bucket.
	if got := histQuantile([]bucket{{0.002, 10}, {math.Inf(1), 10}}, 0.5); math.Abs(got-0.001) > 1e-12 {
		t.Errorf("first bucket: %v, want 0.001", got)
	}
}

func TestHistDelta(t *testing.T) {
	before := []bucket{{0.001, 1}, {math.Inf(1), 3}}
	after := []bucket{{0.001, 4}, {0.002, 5}, {math.Inf(1), 9}}
	d := histDelta(before, after)
	want := []bucket{{0.001, 3}, {0.002, 5}, {math.Inf(1), 6}}
	for i := range want {
		if d[i] != want[i] {
			t.Fatalf("histDelta = %+v, want %+v", d, want)
		}
	}
}

func TestApplyMix(t *testing.T) {
	before := promSamples{
		`queen_fsm_apply_seconds_count{group="0",op="pop"}`:         100,
		`queen_fsm_apply_seconds_count{group="0",op="transaction"}`: 50,
		"queen_fsm_batch_entries_count":                             10,
		"queen_fsm_batch_entries_sum":                               150,
	}
	// Three replicas applied 330 pops and 300 transactions for 100 orders,
	// in 60 batches of 630 entries; a group label does not split the op.
	after := promSamples{
		`queen_fsm_apply_seconds_count{group="0",op="pop"}`:         100 + 220,
		`queen_fsm_apply_seconds_count{group="1",op="pop"}`:         110,
		`queen_fsm_apply_seconds_count{group="0",op="transaction"}`: 50 + 300,
		`queen_fsm_apply_seconds_count{group="0",op="push"}`:        0,
		"queen_fsm_batch_entries_count":                             10 + 60,
		"queen_fsm_batch_entries_sum":                               150 + 630,
	}
	got := applyMix(before, after, 100, 3)
	want := "entries per message pop 1.100 transaction 1.000; 10.5 entries per apply batch"
	if got != want {
		t.Errorf("applyMix = %q, want %q", got, want)
	}
}

func TestParseProcStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	m, err := parseProcStat("cpu  100 2 30 5000 40 5 6 7 0 0\ncpu0 50 1 15 2500 20 2 3 3 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system+irq+softirq = 143 ticks; idle and iowait are not busy
	if want := (machineCPU{busy: 1430 * time.Millisecond, steal: 70 * time.Millisecond}); m != want {
		t.Errorf("parseProcStat = %+v, want %+v", m, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) took it", bad)
		}
	}
}

func TestReadMachineCPU(t *testing.T) {
	m, err := readMachineCPU()
	if err != nil {
		t.Skip("no /proc/stat here:", err)
	}
	spin := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(spin) {
	}
	if d := m.since(); d.busy <= 0 || d.steal < 0 {
		t.Errorf("after 50 ms of spinning the machine was busy %v (steal %v)", d.busy, d.steal)
	}
}
