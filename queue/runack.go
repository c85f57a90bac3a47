package queue

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// RunAck settles a stream cycle's run (spec §4.16): every message of the
// partition up to and including the one of TransactionID, under LeaseID,
// which must be live and cover it. The last one takes Status, the ones
// before it are completed.
type RunAck struct {
	PartitionID   []byte
	Group         string // "" = queue mode
	TransactionID string
	LeaseID       string
	Status        command.AckStatus
	Release       bool // let the partition go even if the lease covers more
}

// RunAckResult is what a RunAck did.
type RunAckResult struct {
	OK            bool
	Error         string
	Replayed      bool // already consumed under the lease: the cycle committed before
	LeaseReleased bool
	Dlq           bool
	Acked         uint32 // positions the cursor moved over
}

// AckRun applies a RunAck. A refusal writes nothing the caller must keep
// (the cycle rolls back).
func (t *Tx) AckRun(in RunAck) RunAckResult {
	var res RunAckResult
	item := &command.AckItem{TransactionId: in.TransactionID, PartitionId: in.PartitionID, ConsumerGroup: in.Group,
		LeaseId: in.LeaseID, Status: command.AckStatus_COMPLETED}
	ps := t.partitionByID(in.PartitionID)
	seq := t.resolveAcks([]*command.AckItem{item})[0]
	if ps == nil || seq == 0 {
		res.Error = errMessageNotFound
		return res
	}
	group := ackGroupName(item)
	cs := t.cursor(ps.rec.Id, group)
	cur := cs.rec
	if seq <= max(cur.Consumed, ps.rec.FirstSeq-1) {
		if heldBy(cur, in.LeaseID) {
			res.OK, res.Replayed = true, true
			return res
		}
		res.Error = errInvalidLease
		return res
	}
	l := cur.Lease
	if !leases.Live(l, t.now) || l.LeaseId != in.LeaseID || !leases.Covers(l, seq) {
		res.Error = errInvalidLease
		return res
	}
	ag := &ackGroup{qs: t.queue(ps.rec.Queue), ps: ps, cs: cs, group: group, preLease: proto.Clone(l).(*command.Lease)}
	before := cur.Consumed
	for s := max(cur.Consumed, ps.rec.FirstSeq-1) + 1; s <= seq; s++ {
		it := item
		if s == seq && in.Status != command.AckStatus_COMPLETED {
			it = proto.Clone(item).(*command.AckItem)
			it.Status = in.Status
		}
		r := &command.AckItemResult{}
		t.ackOne(ag, it, s, r, true, nil)
		if !r.Success {
			res.Error = r.Error
			return res
		}
		res.LeaseReleased = res.LeaseReleased || r.LeaseReleased
		res.Dlq = res.Dlq || r.Dlq
	}
	res.Acked = uint32(cur.Consumed - before)
	if in.Release && cur.Lease != nil && cur.Lease.LeaseId == in.LeaseID {
		t.releaseLease(ag)
		res.LeaseReleased = true
	}
	res.OK = true
	return res
}

// LeaseHeld reports whether a live lease of group ("" = queue mode) holds
// the partition of pid.
func (t *Tx) LeaseHeld(pid []byte, group string) bool {
	if group == "" {
		group = command.QueueModeGroup
	}
	ps := t.partitionByID(pid)
	if ps == nil {
		return false
	}
	return leases.Live(t.cursor(ps.rec.Id, group).rec.Lease, t.now)
}

// PartitionQueueOf is the queue of the partition of pid, or "" when there
// is none.
func (t *Tx) PartitionQueueOf(pid []byte) string {
	if ps := t.partitionByID(pid); ps != nil {
		return ps.rec.Queue
	}
	return ""
}
