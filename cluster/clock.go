package cluster

import (
	"sync"
	"time"
)

// stampClock gives the leader's entry stamps, in µs since the epoch. It is
// anchored to the wall clock once, when the node becomes leader, and then
// advances with the monotonic clock: a wall clock stepped forward or back
// while a node leads moves no lease and no TTL (DESIGN.md, traps). Stamps
// never go backwards, also across leaders: a new anchor is at least the last
// applied stamp.
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
	c.anchor(0)
	return c
}

// anchor re-reads the wall clock, never going below floor.
func (c *stampClock) anchor(floorUs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.baseUs = max(now.UnixMicro()+c.skewUs, floorUs, c.last)
	c.baseMono = now
}

// read returns the clock's current time without advancing it.
func (c *stampClock) read() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.baseUs+time.Since(c.baseMono).Microseconds(), c.last)
}

// next returns a stamp strictly greater than every earlier one and than floor.
func (c *stampClock) next(floorUs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.baseUs + time.Since(c.baseMono).Microseconds()
	now = max(now, c.last+1, floorUs+1)
	c.last = now
	return now
}

// setSkew shifts the wall clock reading used at the next anchor.
func (c *stampClock) setSkew(d time.Duration) {
	c.mu.Lock()
	c.skewUs = d.Microseconds()
	c.mu.Unlock()
}
