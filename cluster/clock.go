package cluster

import (
	"sync"
	"time"
)

// stampClock gives the leader's entry stamps, in µs since the epoch. It is
// anchored to the wall clock once, when the node becomes leader, and then
// advances with the monotonic clock: a wall clock stepped forward or back
// while a node leads moves no lease and no TTL (DESIGN.md, traps).
//
// The anchor itself is bounded on both sides. It is never below the last
// applied stamp (stamps never go backwards across leaders), and never more
// than the time this node has measured on its monotonic clock since it
// applied that stamp, plus a second, ahead of it: a new leader whose wall
// clock jumped 300 s ahead cannot end every lease 300 s early, while a
// cluster that was idle for an hour still moves its clock by that hour.
// Whatever gap remains between the stamps and the wall clock (a bounded
// anchor, a wall clock stepped forward while leading) is closed by slewing:
// stamps run at most 10% faster than real time until they meet the wall
// clock, so a lease ends at most 10% early, and the stamps never lag the
// wall clock for good. A wall clock stepped back is ignored (the stamps
// keep the monotonic pace).
type stampClock struct {
	mu       sync.Mutex
	baseUs   int64
	baseMono time.Time
	last     int64
	// skewUs is added to the wall clock when anchoring (fault tests only).
	skewUs int64
}

func newStampClock() *stampClock {
	c := &stampClock{}
	c.anchor(0, -1)
	return c
}

// anchorSlack is how far a new anchor may run ahead of the elapsed time
// this node measured since the last applied stamp.
const anchorSlack = time.Second

// anchor re-reads the wall clock, never going below floor, and never more
// than sinceFloor (+ anchorSlack) above it. sinceFloor < 0 means unknown
// (nothing applied since start): then only the floor applies.
func (c *stampClock) anchor(floorUs int64, sinceFloor time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	wall := now.UnixMicro() + c.skewUs
	if sinceFloor >= 0 && floorUs > 0 {
		wall = min(wall, floorUs+(sinceFloor+anchorSlack).Microseconds())
	}
	c.baseUs = max(wall, floorUs, c.last)
	c.baseMono = now
}

// slewDivisor: stamps may gain on real time by at most 1/slewDivisor.
const slewDivisor = 10

// nowLocked is the clock's reading: the monotonic pace from the anchor,
// plus whatever part of a gap to the wall clock slewing has closed.
func (c *stampClock) nowLocked() int64 {
	now := time.Now()
	elapsed := now.Sub(c.baseMono).Microseconds()
	natural := c.baseUs + elapsed
	if gap := now.UnixMicro() + c.skewUs - natural; gap > 0 {
		natural += min(gap, elapsed/slewDivisor)
	}
	return natural
}

// read returns the clock's current time without advancing it.
func (c *stampClock) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.nowLocked(), c.last)
}

// next returns a stamp strictly greater than every earlier one and than floor.
func (c *stampClock) next(floorUs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := max(c.nowLocked(), c.last+1, floorUs+1)
	c.last = now
	return now
}

// setSkew shifts the wall clock reading used at the next anchor.
func (c *stampClock) setSkew(d time.Duration) {
	c.mu.Lock()
	c.skewUs = d.Microseconds()
	c.mu.Unlock()
}
