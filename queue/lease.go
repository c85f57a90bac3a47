package queue

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// Extend refusal texts (spec §4.6).
const (
	errLeaseNotFound = "Lease not found"
	errLeaseExpired  = "Lease already expired"
)

// ExtendLease extends every partition lease that carries the lease id (all
// partitions of a multi-partition pop).
func (t *Tx) ExtendLease(in *command.ExtendLease) *command.ExtendResult {
	res := &command.ExtendResult{}
	found := 0
	for _, h := range leases.Holders(t.tx, in.LeaseId) {
		cs := t.cursor(h.PID, h.Group)
		l := cs.rec.Lease
		if l == nil || l.LeaseId != in.LeaseId {
			continue
		}
		found++
		if leases.Extend(l, t.now, in.Seconds) {
			cs.dirty = true
			leases.Remove(t.tx, l.LeaseId, h.PID, h.Group)
			leases.Put(t.tx, leases.Holder{LeaseID: l.LeaseId, PID: h.PID, Group: h.Group, ExpiresUs: l.ExpiresUs})
			res.Success = true
			res.ExpiresUs = max(res.ExpiresUs, l.ExpiresUs)
		}
	}
	switch {
	case found == 0:
		res.Error = errLeaseNotFound
	case !res.Success:
		res.Error = errLeaseExpired
	}
	return res
}

// SweepLeases drops up to limit leases that expired by entry time. Expiry
// itself needs no entry (every check compares with entry time); this keeps
// the lease table small. It reports how many it dropped and whether more
// have expired.
func (t *Tx) SweepLeases(limit int) (int, bool) {
	due, more := leases.Expired(t.tx, t.now, limit)
	for _, h := range due {
		leases.Remove(t.tx, h.LeaseID, h.PID, h.Group)
		cs := t.cursor(h.PID, h.Group)
		if l := cs.rec.Lease; l != nil && l.LeaseId == h.LeaseID && !leases.Live(l, t.now) {
			cs.rec.Lease = nil
			cs.dirty = true
		}
	}
	return len(due), more
}

// LeaseQueues lists the queues of the partitions leaseID holds, in the
// order of its holders (a multi-partition pop's lease holds several); nil
// when no partition is held under it.
func (rd *Reader) LeaseQueues(leaseID string) []string {
	var out []string
	for _, h := range leases.Holders(rd.r, leaseID) {
		if p := rd.PartitionByID(h.PID); p != nil {
			out = append(out, p.Queue)
		}
	}
	return out
}
