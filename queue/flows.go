package queue

// Flow counts what one command did to one queue's messages, for the
// dashboard's rates (spec §4.12): the state keeps where every cursor is,
// not when it moved, so the rates come from the commands as they apply.
// A command that is discarded (refused whole, a transaction rolled back)
// takes its counts with it.
type Flow struct {
	Pushed       uint64 // messages stored (pushes, drained buffers, fired timers, replays); not duplicates
	Popped       uint64 // messages delivered by pops
	Pops         uint64 // partitions claimed by pops (each a lease, or an autoAck delivery)
	LagSumUs     int64  // over the claims: how long the oldest message delivered had waited
	LagMaxUs     int64
	Consumed     uint64 // messages a group is done with: acked completed, or delivered with autoAck
	Failed       uint64 // failed acks that spent a retry or sent the message to the DLQ
	DeadLettered uint64 // dead-letter records filed
	Conflated    uint64 // older messages conflated deliveries retired undelivered (addendum §8)
}

// Flows counts, by queue, what this command did (nil when nothing).
func (t *Tx) Flows() map[string]*Flow { return t.flows }

func (t *Tx) flow(queue string) *Flow {
	if t.flows == nil {
		t.flows = map[string]*Flow{}
	}
	f := t.flows[queue]
	if f == nil {
		f = &Flow{}
		t.flows[queue] = f
	}
	return f
}

// countPop notes one claim of a partition: n messages, the oldest of them
// created at createdUs (0 = unknown).
func (t *Tx) countPop(queue string, n int, createdUs int64) {
	f := t.flow(queue)
	f.Popped += uint64(n)
	f.Pops++
	if createdUs > 0 && createdUs <= t.now {
		lag := t.now - createdUs
		f.LagSumUs += lag
		f.LagMaxUs = max(f.LagMaxUs, lag)
	}
}
