package queue

import (
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// Ack refusal texts (spec §4.4).
const (
	errMessageNotFound = "Message not found"
	errInvalidLease    = "Invalid or expired lease"
	errAlreadyAcked    = "Message already acknowledged"
	defaultDLQError    = "Retries exhausted"
)

// ackGroup is one (partition, group) touched by an ack command. The lease
// it saw when the command started decides every item's fencing, so that a
// batch is judged against the lease as it stood when the request arrived
// (spec §4.4, §5.4): a failed item that releases the lease does not make
// the later items of the same batch fail.
type ackGroup struct {
	qs       *queueState
	ps       *partState
	cs       *cursorState
	group    string
	preLease *command.Lease // live at the start of the command, else nil
	// Decided at the command's first failed item, then held for the rest:
	failedSeen bool
	exhausted  bool // retries spent: failed items go to the DLQ
	retrySpent bool // this command already spent the lease's one retry
}

// Acks applies ack items and returns one result per item, in request order.
// inTxn selects the transaction rules (addendum §4.5): a non-completed ack
// of an already consumed message is refused instead of being a no-op, and
// an ack without its own leaseId must be covered by one of required.
func (t *Tx) Acks(items []*command.AckItem, inTxn bool, required []string) []*command.AckItemResult {
	results := make([]*command.AckItemResult, len(items))
	type resolved struct {
		i   int
		pid string
		grp string
		seq uint64
		ag  *ackGroup
	}
	var todo []resolved
	groups := map[string]*ackGroup{}
	seqs := t.resolveAcks(items)
	for i, it := range items {
		r := &command.AckItemResult{TransactionId: it.TransactionId}
		results[i] = r
		group := ackGroupName(it)
		ps := t.partitionByID(it.PartitionId)
		seq := seqs[i]
		if seq == 0 {
			r.Error, r.NotFound = errMessageNotFound, true
			continue
		}
		r.Queue, r.Partition = ps.rec.Queue, ps.rec.Name
		gk := string(pidKey(ps.rec.Id, group))
		ag := groups[gk]
		if ag == nil {
			cs := t.cursor(ps.rec.Id, group)
			ag = &ackGroup{qs: t.queue(ps.rec.Queue), ps: ps, cs: cs, group: group}
			if leases.Live(cs.rec.Lease, t.now) {
				ag.preLease = proto.Clone(cs.rec.Lease).(*command.Lease)
			}
			groups[gk] = ag
		}
		todo = append(todo, resolved{i: i, pid: string(ps.rec.Id), grp: group, seq: seq, ag: ag})
	}
	// Grouped by partition and group, each in message order (spec §4.4).
	sort.SliceStable(todo, func(a, b int) bool {
		x, y := todo[a], todo[b]
		if x.pid != y.pid {
			return x.pid < y.pid
		}
		if x.grp != y.grp {
			return x.grp < y.grp
		}
		return x.seq < y.seq
	})
	for _, r := range todo {
		t.ackOne(r.ag, items[r.i], r.seq, results[r.i], inTxn, required)
	}
	return results
}

// resolveAcks finds each item's seq (0: not found), one partition at a time.
func (t *Tx) resolveAcks(items []*command.AckItem) []uint64 {
	out := make([]uint64, len(items))
	byPart := map[string][]int{}
	var order []string
	for i, it := range items {
		if ps := t.partitionByID(it.PartitionId); ps != nil {
			k := string(ps.rec.Id)
			if _, seen := byPart[k]; !seen {
				order = append(order, k)
			}
			byPart[k] = append(byPart[k], i)
		}
	}
	for _, k := range order {
		idx := byPart[k]
		ps := t.partitionByID([]byte(k))
		its := make([]*command.AckItem, len(idx))
		for j, i := range idx {
			its[j] = items[i]
		}
		for j, seqs := range t.resolveTxns(ps, its) {
			out[idx[j]] = t.pickAcked(ps, items[idx[j]], seqs)
		}
	}
	return out
}

// pickAcked chooses which of the messages carrying an ack item's
// transactionId it settles, when the dedup window let the id into the
// partition more than once (README, "What names a message"): the one the
// item's live lease covers, else the oldest the group has not consumed,
// else the newest.
func (t *Tx) pickAcked(ps *partState, it *command.AckItem, seqs []uint64) uint64 {
	switch len(seqs) {
	case 0:
		return 0
	case 1:
		return seqs[0]
	}
	cur := t.cursor(ps.rec.Id, ackGroupName(it)).rec
	if l := cur.Lease; l != nil && leases.Live(l, t.now) && (it.LeaseId == "" || it.LeaseId == l.LeaseId) {
		for _, s := range seqs {
			if leases.Covers(l, s) {
				return s
			}
		}
	}
	for _, s := range seqs {
		if s > cur.Consumed {
			return s
		}
	}
	return seqs[len(seqs)-1]
}

func (t *Tx) ackOne(ag *ackGroup, it *command.AckItem, seq uint64, r *command.AckItemResult, inTxn bool, required []string) {
	cur := ag.cs.rec
	if seq <= cur.Consumed {
		// Already consumed. A fenced ack must name a lease that held it (the
		// live one or a recently released one): a worker whose lease ran out
		// and whose message another worker has since acked is refused, so a
		// late commit cannot write its marker (seed 000). A retried ack under
		// the lease that consumed it is a success: the reply to the first one
		// may have been lost (DESIGN.md, traps).
		if it.LeaseId != "" && !heldBy(cur, it.LeaseId) {
			r.Error, r.LeaseRefused = errInvalidLease, true
			return
		}
		if it.LeaseId == "" && len(required) > 0 && !slices.ContainsFunc(required, func(id string) bool { return heldBy(cur, id) }) {
			r.Error, r.LeaseRefused = errInvalidLease, true
			return
		}
		if inTxn && it.Status != command.AckStatus_COMPLETED {
			r.Error, r.LeaseRefused = errAlreadyAcked, true
			return
		}
		r.Success, r.Noop = true, true
		return
	}
	lease := ag.preLease
	var fenced bool
	switch {
	case it.LeaseId != "":
		if lease == nil || lease.LeaseId != it.LeaseId || !leases.Covers(lease, seq) {
			r.Error, r.LeaseRefused = errInvalidLease, true
			return
		}
		fenced = true
	case len(required) > 0:
		if lease == nil || !slices.Contains(required, lease.LeaseId) || !leases.Covers(lease, seq) {
			r.Error, r.LeaseRefused = errInvalidLease, true
			return
		}
		fenced = true
	default:
		// No lease evidence (0.15 clients): act under the live lease when
		// it covers the message, otherwise as an unleased ack.
		fenced = leases.Covers(lease, seq)
	}
	// Unleased acks only ever act on the next message: anything further
	// would skip messages nobody acked.
	if !fenced && seq != cur.Consumed+1 {
		r.Success = true
		return
	}
	r.Success = true
	// leaseHeld: the lease this ack was judged under is still in the record
	// (a failed item earlier in this command may have released it).
	leaseHeld := fenced && cur.Lease != nil && cur.Lease.LeaseId == lease.LeaseId
	switch it.Status {
	case command.AckStatus_COMPLETED:
		if fenced && !leaseHeld {
			return // the run was given back by an earlier failure; it comes again
		}
		before := cur.Consumed
		t.consume(ag, seq, r)
		t.flow(ag.ps.rec.Queue).Consumed += cur.Consumed - before
	case command.AckStatus_RETRY:
		if leaseHeld {
			t.releaseLease(ag)
			r.LeaseReleased = true
		}
		cur.RetryVisibleUs = 0
		ag.cs.dirty = true
		t.touch(ag.ps.rec.Queue)
	case command.AckStatus_FAILED, command.AckStatus_DLQ:
		if !ag.failedSeen {
			ag.failedSeen = true
			ag.exhausted = int64(cur.RetryCount) >= ag.qs.rec.Options.GetRetryLimit()
		}
		if it.Status == command.AckStatus_DLQ || ag.exhausted {
			if fenced && !leaseHeld {
				return
			}
			text := it.Error
			if !it.HasError || text == "" {
				text = defaultDLQError
			}
			t.flow(ag.ps.rec.Queue).Failed++
			t.deadLetter(ag, seq, text)
			r.Dlq = true
			t.consume(ag, seq, r)
			cur.RetryCount = 0
			ag.cs.dirty = true
			return
		}
		if ag.retrySpent || (fenced && !leaseHeld) {
			return // one retry per lease and command (spec §5.4)
		}
		// Give the partition back, spend one retry, and hold the lane for
		// the backoff.
		if leaseHeld {
			t.releaseLease(ag)
			r.LeaseReleased = true
		}
		ag.retrySpent = true
		t.flow(ag.ps.rec.Queue).Failed++
		cur.RetryCount++
		cur.RetryVisibleUs = t.now + retryOf(ag.qs.rec.Options).DelayUs(cur.RetryCount, t.messageID(ag, seq))
		ag.cs.dirty = true
		t.touch(ag.ps.rec.Queue)
	}
}

// consume marks seq done and releases the lease when its run is complete.
func (t *Tx) consume(ag *ackGroup, seq uint64, r *command.AckItemResult) {
	cur := ag.cs.rec
	before := cur.Consumed
	runDone := leases.MarkConsumed(cur, seq)
	if l := cur.Lease; l != nil && l.Conflated && seq == l.LastSeq && cur.Consumed > before+1 {
		r.Conflated = cur.Consumed - before - 1 // retired undelivered (addendum §8)
		t.flow(ag.ps.rec.Queue).Conflated += r.Conflated
	}
	t.consumed(ag.qs, ag.group, before, cur.Consumed)
	if cur.Consumed != before {
		cur.RetryCount = 0 // the head moved on: its failures are history
		cur.RetryVisibleUs = 0
	}
	if runDone {
		t.releaseLease(ag)
		r.LeaseReleased = true
	}
	ag.cs.dirty = true
}

func (t *Tx) releaseLease(ag *ackGroup) {
	cur := ag.cs.rec
	if cur.Lease == nil {
		return
	}
	leases.Remove(t.tx, cur.Lease.LeaseId, ag.ps.rec.Id, ag.group)
	cur.RecentLeases = append(cur.RecentLeases, cur.Lease.LeaseId)
	cur.RecentRuns = append(cur.RecentRuns, &command.LeaseRun{FirstSeq: cur.Lease.FirstSeq, LastSeq: cur.Lease.LastSeq})
	if n := len(cur.RecentLeases); n > maxRecentLeases {
		cur.RecentLeases = append([]string(nil), cur.RecentLeases[n-maxRecentLeases:]...)
	}
	if n := len(cur.RecentRuns); n > maxRecentLeases {
		cur.RecentRuns = append([]*command.LeaseRun(nil), cur.RecentRuns[n-maxRecentLeases:]...)
	}
	cur.Lease = nil
	ag.cs.dirty = true
	t.touch(ag.ps.rec.Queue)
}

func (t *Tx) messageID(ag *ackGroup, seq uint64) []byte {
	if m, err := t.batch.Message(ag.ps.rec.Id, seq); err == nil {
		return m.ID
	}
	return nil
}

// deadLetter files seq under the group in the queue's dead-letter list,
// copied from the message's own stored record in this same entry.
func (t *Tx) deadLetter(ag *ackGroup, seq uint64, text string) {
	rec := &command.DLQRecord{PartitionId: ag.ps.rec.Id, Queue: ag.ps.rec.Queue, Partition: ag.ps.rec.Name,
		ConsumerGroup: ag.group, Error: text, RetryCount: ag.cs.rec.RetryCount, FailedUs: t.now, Seq: seq}
	if m, err := t.batch.Message(ag.ps.rec.Id, seq); err == nil {
		rec.MessageId, rec.TransactionId, rec.Payload = m.ID, m.TxnID, m.Payload
		rec.ProducerSub, rec.TraceId, rec.CreatedUs = m.ProducerSub, m.TraceID, m.CreatedUs
	}
	t.addDeadLetter(ag.qs, rec)
}

// DeadLetter files a dead letter that did not come from a stored message
// (a timer that could never fire) in queue's DLQ, creating the queue and
// the partition it names so the row can be found.
func (t *Tx) DeadLetter(queue, partition string, rec *command.DLQRecord) {
	qs := t.ensureQueue(queue)
	ps := t.ensurePartition(queue, partition)
	rec.PartitionId, rec.Queue, rec.Partition = ps.rec.Id, queue, partition
	t.addDeadLetter(qs, rec)
	t.touch(queue)
}

const maxRecentLeases = 4

// heldBy reports whether leaseID is the cursor's lease or one it released
// recently.
func heldBy(cur *command.CursorRecord, leaseID string) bool {
	return (cur.Lease != nil && cur.Lease.LeaseId == leaseID) || slices.Contains(cur.RecentLeases, leaseID)
}

// consumed keeps the queue's pending count (what maxSize bounds) in step
// with the queue-mode cursor.
func (t *Tx) consumed(qs *queueState, group string, before, after uint64) {
	if group != command.QueueModeGroup || qs == nil || after <= before {
		return
	}
	qs.rec.Pending -= min(qs.rec.Pending, after-before)
	qs.dirty = true
}
