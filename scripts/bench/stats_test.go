package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	seq := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		return s
	}
	cases := []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{0, 50, 0},
		{1, 50, 1 * time.Millisecond},
		{1, 99.9, 1 * time.Millisecond},
		{100, 50, 50 * time.Millisecond},
		{100, 90, 90 * time.Millisecond},
		{100, 99, 99 * time.Millisecond},
		{100, 99.9, 100 * time.Millisecond},
		{100, 100, 100 * time.Millisecond},
		{100, 0.001, 1 * time.Millisecond},
		{1000, 99.9, 999 * time.Millisecond},
		{3, 50, 2 * time.Millisecond},
		{4, 50, 2 * time.Millisecond},
	}
	for _, c := range cases {
		if got := percentile(seq(c.n), c.p); got != c.want {
			t.Errorf("percentile(1..%d ms, %v) = %v, want %v", c.n, c.p, got, c.want)
		}
	}
}

func TestSummarizeMergesWorkers(t *testing.T) {
	a, b := &recorder{}, &recorder{}
	for i := 1; i <= 50; i++ {
		a.add(time.Duration(2*i) * time.Millisecond)   // evens
		b.add(time.Duration(2*i-1) * time.Millisecond) // odds
	}
	s := summarize([]*recorder{a, b})
	if s.Count != 100 || s.P50 != 50 || s.P99 != 99 || s.Max != 100 || s.Mean != 50.5 {
		t.Errorf("summarize = %+v", s)
	}
}
