package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Waits for a condition, for tests that would otherwise sleep and hope.

// waitParked waits until the node reports count long-poll pops parked
// (queen_parked_pops): from then on a change they may take wakes them.
func (a *api) waitParked(count int) {
	a.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := a.metric("queen_parked_pops")
		if got == float64(count) {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("queen_parked_pops is %v after 15 s, want %d", got, count)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing the test with what after
// total.
func waitFor(t testing.TB, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v: %s", total, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitAcked waits until the ledger holds at least n acked items.
func (l *ledger) waitAcked(t testing.TB, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, "acked items under the push load", func() bool { return l.ackedCount() >= n })
}

// logCount is how many times the node's log says s.
func (n *node) logCount(s string) int {
	b, _ := os.ReadFile(n.LogPath())
	return strings.Count(string(b), s)
}
