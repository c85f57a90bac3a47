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
// keep the monotonic pace). And the clock never reads below the last
// applied stamp: when the log gets ahead of it (nowFromLocked), it goes on
// from that stamp.
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

// nowFromLocked is the clock's reading, never below floorUs: when the log
// is ahead of the clock it rebases the clock there, to go on from it at the
// monotonic pace. That happens to a leader whose anchor read an old floor:
// a node that was down, elected before it applied what the others
// committed meanwhile, anchors near its own last stamp, and the stamps of
// the entries it applies next are tens of seconds later. Without the
// rebase every stamp would be the last applied one plus 1µs until slewing
// caught up (about 0.9 s of catching up per second behind): entry time
// would stand still, no lease would expire and no timer would fire for
// that long.
func (c *stampClock) nowFromLocked(floorUs int64) int64 {
	if now := c.nowLocked(); now >= floorUs {
		return now
	}
	c.baseUs, c.baseMono = floorUs, time.Now()
	return floorUs
}

// read returns the clock's current time without advancing it, never below
// floorUs (the last applied stamp).
func (c *stampClock) read(floorUs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.nowFromLocked(floorUs), c.last)
}

// next returns a stamp strictly greater than every earlier one and than floor.
func (c *stampClock) next(floorUs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := max(c.nowFromLocked(floorUs), c.last+1, floorUs+1)
	c.last = now
	return now
}

// setSkew shifts the wall clock reading used at the next anchor.
func (c *stampClock) setSkew(d time.Duration) {
	c.mu.Lock()
	c.skewUs = d.Microseconds()
	c.mu.Unlock()
}
