package main

import (
	"math"
	"testing"
	"time"
)

func TestSlope(t *testing.T) {
	b, mean := slope([]float64{0, 1, 2, 3}, []float64{10, 12, 14, 16})
	if math.Abs(b-2) > 1e-9 || math.Abs(mean-13) > 1e-9 {
		t.Fatalf("slope %v mean %v", b, mean)
	}
	if b, _ := slope([]float64{1}, []float64{5}); b != 0 {
		t.Fatalf("one point: %v", b)
	}
}

// The steady phase leaves out the warm-up and the drain after the
// producers stopped.
func TestSteadyLeavesOutWarmupAndDrain(t *testing.T) {
	s := &sampler{}
	for i := 1; i <= 10; i++ {
		rate := 100.0
		if i > 8 {
			rate = 0 // draining
		}
		s.samples = append(s.samples, sample{at: time.Duration(i) * 10 * time.Second, pushRate: rate})
	}
	got := s.steady(&options{warmup: 0.25})
	if len(got) != 7 || got[0].at != 20*time.Second || got[len(got)-1].at != 80*time.Second {
		t.Fatalf("steady: %d samples from %v to %v", len(got), got[0].at, got[len(got)-1].at)
	}
}
