package leases

import "testing"

func TestRetryDelayIsConstantByDefault(t *testing.T) {
	r := Retry{DelayMs: 1000}
	id := []byte("message-1")
	for attempt := uint32(1); attempt <= 10; attempt++ {
		d := r.DelayUs(attempt, id)
		if d < 1_000_000 || d > 1_250_000 {
			t.Fatalf("attempt %d waits %d us, want 1s..1.25s", attempt, d)
		}
		if d != r.DelayUs(attempt, id) {
			t.Fatalf("attempt %d: the jitter is not deterministic", attempt)
		}
	}
	// The jitter differs between messages (it is a hash, not a constant).
	seen := map[int64]bool{}
	for i := range 20 {
		seen[r.DelayUs(1, []byte{byte(i)})] = true
	}
	if len(seen) < 10 {
		t.Fatalf("20 messages got only %d distinct delays", len(seen))
	}
}

func TestRetryBackoffDoublesUpToItsCap(t *testing.T) {
	r := Retry{DelayMs: 1000, Backoff: true, MaxDelayMs: 5000}
	id := []byte("m")
	want := []int64{1, 2, 4, 5, 5, 5}
	for i, base := range want {
		d := r.DelayUs(uint32(i+1), id)
		if d < base*1e6 || d > base*1e6*5/4 {
			t.Fatalf("attempt %d waits %d us, want %d s plus at most 25%%", i+1, d, base)
		}
	}
	// No cap set: five minutes; a cap below the delay never shortens it.
	if d := (Retry{DelayMs: 1000, Backoff: true}).DelayUs(30, id); d < 300e6 || d > 375e6 {
		t.Fatalf("default cap: %d us", d)
	}
	if d := (Retry{DelayMs: 4000, Backoff: true, MaxDelayMs: 1000}).DelayUs(3, id); d < 4e6 || d > 5e6 {
		t.Fatalf("cap below the delay: %d us", d)
	}
	if d := (Retry{DelayMs: 0, Backoff: true}).DelayUs(3, id); d != 0 {
		t.Fatalf("retryDelay 0 waits %d us", d)
	}
}
