package leases

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"github.com/queen-node/queen-node/command"
)

// Live reports whether l still holds its partition at entry time now (µs).
// A lease is live strictly before its expiry: at expiresUs it has ended.
func Live(l *command.Lease, now int64) bool {
	return l != nil && l.LeaseId != "" && now < l.ExpiresUs
}

// GrantConflated returns a lease over the run first..last of which only
// last was delivered (addendum §8): when last is done, the run is.
func GrantConflated(id string, now, expiresUs int64, first, last uint64) *command.Lease {
	l := Grant(id, now, expiresUs, first, last)
	l.Conflated = true
	return l
}

// Grant returns a lease over the delivered run first..last.
func Grant(id string, now, expiresUs int64, first, last uint64) *command.Lease {
	return &command.Lease{LeaseId: id, ExpiresUs: expiresUs, FirstSeq: first, LastSeq: last, ClaimedUs: now}
}

// Extend pushes a live lease's expiry to max(current, now+seconds). It
// reports false, changing nothing, when the lease is not live.
func Extend(l *command.Lease, now, seconds int64) bool {
	if !Live(l, now) {
		return false
	}
	l.ExpiresUs = max(l.ExpiresUs, now+seconds*1e6)
	return true
}

// Covers reports whether seq was delivered under l.
func Covers(l *command.Lease, seq uint64) bool {
	return l != nil && seq >= l.FirstSeq && seq <= l.LastSeq
}

// MarkConsumed records that seq is done for the group (acked, or moved to
// the dead-letter queue). The cursor advances over the contiguous prefix of
// done messages only (spec §5.3); a seq done out of order waits in the
// lease's acked list until the gap before it closes. A seq that is neither
// next nor inside the lease's run is dropped: it will be delivered again.
// It reports whether the whole delivered run is now consumed.
func MarkConsumed(cur *command.CursorRecord, seq uint64) (runDone bool) {
	l := cur.Lease
	switch {
	case seq <= cur.Consumed:
	case l != nil && l.Conflated && seq == l.LastSeq:
		// A conflated delivery is done (addendum §8): the older messages of
		// its run were never delivered, and are retired with it.
		cur.Consumed, l.Acked = seq, nil
	case seq == cur.Consumed+1:
		cur.Consumed = seq
		if l != nil {
			// Absorb acks that were waiting for this gap.
			for len(l.Acked) > 0 {
				i := slices.Index(l.Acked, cur.Consumed+1)
				if i < 0 {
					break
				}
				cur.Consumed++
				l.Acked = slices.Delete(l.Acked, i, i+1)
			}
			l.Acked = slices.DeleteFunc(l.Acked, func(s uint64) bool { return s <= cur.Consumed })
		}
	case Covers(l, seq):
		if !slices.Contains(l.Acked, seq) {
			l.Acked = append(l.Acked, seq)
			slices.Sort(l.Acked)
		}
	}
	return l != nil && cur.Consumed >= l.LastSeq
}

// DefaultRetryDelayMaxMs caps an exponential backoff when a queue sets no
// retryDelayMax: 5 minutes.
const DefaultRetryDelayMaxMs = 300_000

// Retry is how a queue spaces redeliveries after failed acks (spec §5.4).
type Retry struct {
	DelayMs    int64 // retryDelay
	Backoff    bool  // retryBackoff: double the delay per failure
	MaxDelayMs int64 // retryDelayMax: the backoff's cap; 0 = DefaultRetryDelayMaxMs
}

// DelayUs is how long a message waits after the attempt-th failed delivery
// (attempt >= 1): retryDelay each time, or with Backoff retryDelay doubled
// per attempt up to max(retryDelay, MaxDelayMs); plus a jitter of up to 25%.
// The jitter is a hash of the message id and the attempt, never a random
// draw, so every replica computes the same instant.
func (r Retry) DelayUs(attempt uint32, messageID []byte) int64 {
	if r.DelayMs <= 0 {
		return 0
	}
	d := r.DelayMs * 1000
	if r.Backoff {
		limitMs := r.MaxDelayMs
		if limitMs <= 0 {
			limitMs = DefaultRetryDelayMaxMs
		}
		limit := max(d, limitMs*1000)
		for i := uint32(1); i < attempt && d < limit; i++ {
			d *= 2
		}
		d = min(d, limit)
	}
	h := fnv.New64a()
	h.Write(messageID)
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], attempt)
	h.Write(a[:])
	return d + int64(h.Sum64()%uint64(d/4+1))
}
