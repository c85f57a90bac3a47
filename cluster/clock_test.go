package cluster

import (
	"testing"
	"time"
)

func TestStampClockNeverGoesBackAndBoundsAForwardJump(t *testing.T) {
	c := newStampClock()
	floor := time.Now().Add(time.Hour).UnixMicro() // the last applied stamp is ahead of our wall clock
	c.anchor(floor, 0)
	if s := c.next(floor); s <= floor {
		t.Fatalf("stamp %d went below the last applied %d", s, floor)
	}
	// A wall clock 300 s ahead, 2 s after the last applied entry: the
	// anchor moves about 2 s, not 300.
	c2 := newStampClock()
	c2.setSkew(300 * time.Second)
	last := time.Now().UnixMicro()
	c2.anchor(last, 2*time.Second)
	if jump := time.Duration(c2.read(0)-last) * time.Microsecond; jump > 3*time.Second+100*time.Millisecond {
		t.Fatalf("a 300 s clock jump moved the stamps by %v", jump)
	}
	// The remaining gap closes by slewing, at most 10% faster than real time.
	time.Sleep(100 * time.Millisecond)
	if jump := time.Duration(c2.read(0)-last) * time.Microsecond; jump > 3*time.Second+120*time.Millisecond {
		t.Fatalf("slewing ran too fast: %v after 100ms", jump)
	}
	// After a long idle period the clock does move by that much.
	c3 := newStampClock()
	old := time.Now().Add(-time.Hour).UnixMicro()
	c3.anchor(old, time.Hour)
	if lag := time.Now().UnixMicro() - c3.read(0); lag > int64(time.Second/time.Microsecond) {
		t.Fatalf("after an idle hour the stamps lag the wall clock by %dµs", lag)
	}
	// Stamps strictly increase.
	a, b := c3.next(0), c3.next(0)
	if b <= a {
		t.Fatalf("stamps %d then %d", a, b)
	}
}

// A node elected before it applied what the others committed while it was
// down anchors near its own old stamp; the entries it applies next carry
// stamps tens of seconds later. Its stamps must go on from those at the
// pace of real time, not stand still at the last one plus 1µs until
// slewing catches up (a jepsen run saw entry time stand still for 20 s
// after such an election: no lease expired, and a drain found two
// partitions leased).
func TestStampClockGoesOnFromALogThatGotAheadOfItsAnchor(t *testing.T) {
	c := newStampClock()
	stale := time.Now().Add(-40 * time.Second).UnixMicro()       // this node's last stamp before it went down
	c.anchor(stale, 0)                                           // elected while applying the catch-up
	floor := time.Now().Add(-500 * time.Millisecond).UnixMicro() // the others' last stamp, applied at the barrier
	first := c.next(floor)
	if first <= floor {
		t.Fatalf("stamp %d not above the last applied %d", first, floor)
	}
	time.Sleep(100 * time.Millisecond)
	second := c.next(first)
	if moved := time.Duration(second-first) * time.Microsecond; moved < 90*time.Millisecond {
		t.Fatalf("stamps moved %v in 100ms of real time after the log got ahead of the anchor", moved)
	}
	// Readings outside apply (pop readiness, sweeps, timers) move too.
	r1 := c.read(second)
	time.Sleep(100 * time.Millisecond)
	if moved := time.Duration(c.read(second)-r1) * time.Microsecond; moved < 90*time.Millisecond {
		t.Fatalf("read moved %v in 100ms of real time", moved)
	}
	// A reading never falls below the floor it is given.
	ahead := time.Now().Add(time.Minute).UnixMicro()
	if r := c.read(ahead); r < ahead {
		t.Fatalf("read %d below the floor %d", r, ahead)
	}
}
