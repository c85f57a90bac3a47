package leases

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

func TestLiveUntilExpiry(t *testing.T) {
	l := Grant("L", 0, 100, 1, 3)
	if !Live(l, 99) || Live(l, 100) || Live(nil, 0) {
		t.Fatal("a lease is live strictly before its expiry")
	}
	if Extend(l, 100, 10) {
		t.Fatal("extended a dead lease")
	}
	if !Extend(l, 50, 0) || l.ExpiresUs != 100 {
		t.Fatalf("extend never shortens: %d", l.ExpiresUs)
	}
	if !Extend(l, 50, 10) || l.ExpiresUs != 50+10e6 {
		t.Fatalf("extend: %d", l.ExpiresUs)
	}
}

func TestMarkConsumedContiguousPrefix(t *testing.T) {
	cur := &command.CursorRecord{Consumed: 10, Lease: Grant("L", 0, 100, 11, 14)}
	for _, step := range []struct {
		seq      uint64
		consumed uint64
		done     bool
	}{
		{13, 10, false}, // out of order: waits
		{11, 11, false},
		{12, 13, false}, // closes the gap, absorbs 13
		{20, 13, false}, // outside the run: dropped
		{14, 14, true},
	} {
		if done := MarkConsumed(cur, step.seq); done != step.done || cur.Consumed != step.consumed {
			t.Fatalf("after %d: consumed %d done %v, want %d %v", step.seq, cur.Consumed, done, step.consumed, step.done)
		}
	}
	if len(cur.Lease.Acked) != 0 {
		t.Fatalf("acked list kept %v", cur.Lease.Acked)
	}
}
