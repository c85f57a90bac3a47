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
	if jump := time.Duration(c2.read()-last) * time.Microsecond; jump > 3*time.Second+100*time.Millisecond {
		t.Fatalf("a 300 s clock jump moved the stamps by %v", jump)
	}
	// The remaining gap closes by slewing, at most 10% faster than real time.
	time.Sleep(100 * time.Millisecond)
	if jump := time.Duration(c2.read()-last) * time.Microsecond; jump > 3*time.Second+120*time.Millisecond {
		t.Fatalf("slewing ran too fast: %v after 100ms", jump)
	}
	// After a long idle period the clock does move by that much.
	c3 := newStampClock()
	old := time.Now().Add(-time.Hour).UnixMicro()
	c3.anchor(old, time.Hour)
	if lag := time.Now().UnixMicro() - c3.read(); lag > int64(time.Second/time.Microsecond) {
		t.Fatalf("after an idle hour the stamps lag the wall clock by %dµs", lag)
	}
	// Stamps strictly increase.
	a, b := c3.next(0), c3.next(0)
	if b <= a {
		t.Fatalf("stamps %d then %d", a, b)
	}
}
