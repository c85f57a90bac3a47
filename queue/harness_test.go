package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// The helpers of the tests of push, pop, ack, leases, retries, the DLQ,
// cursors, groups and conflation: one call is one entry, as the FSM's
// handler of that command makes it (fsm/handlers.go), over a domain whose
// entries take their time as the FSM gives it.

// newStamped is a domain of log "0" whose clock starts on 2026-01-01 and
// moves only by advance; entries are at the clock, or 1 µs after the
// previous one (as fsm.ApplyBatch stamps them).
func newStamped(t *testing.T) *domain {
	t.Helper()
	h := newDomain(t, "0")
	h.stamped = true
	h.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	return h
}

func (h *domain) advance(d time.Duration) { h.now += d.Microseconds() }

type popOpt func(*command.Pop)

func group(g string) popOpt      { return func(p *command.Pop) { p.ConsumerGroup = g } }
func batch(n uint32) popOpt      { return func(p *command.Pop) { p.Batch = n } }
func partitions(n uint32) popOpt { return func(p *command.Pop) { p.Partitions = n } }
func fromAll() popOpt            { return func(p *command.Pop) { p.Subscription = command.Pop_DEFAULT_ALL } }
func fromNew() popOpt            { return func(p *command.Pop) { p.Subscription = command.Pop_NEW } }
func autoAck() popOpt            { return func(p *command.Pop) { p.AutoAck = true } }
func onPartition(n string) popOpt {
	return func(p *command.Pop) { p.Partition, p.HasPartition = n, true }
}
func fromTime(us int64) popOpt {
	return func(p *command.Pop) { p.Subscription, p.SubscriptionFromUs = command.Pop_FROM, us }
}
func conflate(on bool) popOpt {
	return func(p *command.Pop) { p.HasConflation, p.Conflation = true, on }
}

// popq pops queue (one message of one partition unless opts say more)
// under a lease id of its own.
func (h *domain) popq(queue string, opts ...popOpt) *command.PopResult {
	h.t.Helper()
	p := &command.Pop{Queue: queue, Batch: 1, Partitions: 1, LeaseId: fmt.Sprint("lease-", h.index+1)}
	for _, o := range opts {
		o(p)
	}
	return h.pop(p)
}

// txnsOf returns the transactionIds of a pop, in order.
func (h *domain) txnsOf(pr *command.PopResult) []string {
	h.t.Helper()
	var out []string
	h.read(func(rd *Reader) {
		for _, m := range pr.Messages {
			if rec := rd.Message(m.PartitionId, m.Seq); rec != nil {
				out = append(out, rec.TransactionId)
			} else {
				out = append(out, "(deleted)")
			}
		}
	})
	return out
}

// ackOf builds an ack item for the i-th message of a pop.
func (h *domain) ackOf(pr *command.PopResult, i int, status command.AckStatus) *command.AckItem {
	h.t.Helper()
	m := pr.Messages[i]
	return &command.AckItem{TransactionId: h.txnsOf(pr)[i], PartitionId: m.PartitionId,
		ConsumerGroup: groupArg(pr.ConsumerGroup), LeaseId: pr.LeaseId, Status: status}
}

func groupArg(g string) string {
	if g == command.QueueModeGroup {
		return ""
	}
	return g
}

// ackAll acks every message of a pop with status in one entry.
func (h *domain) ackAll(pr *command.PopResult, status command.AckStatus) []*command.AckItemResult {
	h.t.Helper()
	var items []*command.AckItem
	for i := range pr.Messages {
		items = append(items, h.ackOf(pr, i, status))
	}
	return h.ack(items...)
}

// txnAcks acks items in one entry under the rules of a transaction's acks
// (inTxn, with requiredLeases); as a transaction, the entry keeps nothing
// when any item is refused.
func (h *domain) txnAcks(required []string, items ...*command.AckItem) []*command.AckItemResult {
	h.t.Helper()
	var out []*command.AckItemResult
	h.entry(func(tx *Tx) bool {
		out = tx.Acks(items, true, required)
		for _, r := range out {
			if !r.Success {
				return false
			}
		}
		return true
	})
	return out
}

func (h *domain) extend(leaseID string, secs int64) *command.ExtendResult {
	h.t.Helper()
	var out *command.ExtendResult
	h.apply(true, func(tx *Tx) { out = tx.ExtendLease(&command.ExtendLease{LeaseId: leaseID, Seconds: secs}) })
	return out
}

// seek keeps its writes only when it found what it moves, as apply does.
func (h *domain) seek(in *command.Seek) *command.SeekResult {
	h.t.Helper()
	var out *command.SeekResult
	h.entry(func(tx *Tx) bool {
		out = tx.Seek(in)
		return out.QueueFound && (!in.OnePartition || out.PartitionFound)
	})
	return out
}

func (h *domain) deleteGroup(in *command.DeleteGroup) *command.DeleteGroupResult {
	h.t.Helper()
	var out *command.DeleteGroupResult
	h.apply(true, func(tx *Tx) { out = tx.DeleteGroup(in) })
	return out
}

// positions sets positions in one entry, as a transaction does: one that
// is refused (its queue does not exist) makes the entry keep nothing.
func (h *domain) positions(ops ...*command.PositionOp) bool {
	h.t.Helper()
	ok := true
	h.entry(func(tx *Tx) bool {
		for _, op := range ops {
			if found, conflict := tx.SetPosition(op); !found || conflict {
				ok = false
				break
			}
		}
		return ok
	})
	return ok
}

func position(queue, group, partition string, offset uint64) *command.PositionOp {
	return &command.PositionOp{Queue: queue, ConsumerGroup: group, Partition: partition, Offset: offset}
}

// buffer holds items in the push buffer in one entry (as a push does while
// push maintenance is on).
func (h *domain) buffer(items ...*command.PushItem) []*command.PushItemResult {
	h.t.Helper()
	var out []*command.PushItemResult
	h.apply(true, func(tx *Tx) {
		for _, it := range items {
			out = append(out, tx.Buffer(it))
		}
	})
	return out
}

// drain appends up to limit buffered pushes in one entry.
func (h *domain) drain(limit int) int {
	h.t.Helper()
	var n int
	h.apply(true, func(tx *Tx) { n = tx.Drain(limit) })
	return n
}

func queueStats(h *domain, q string) PartitionStats {
	var st PartitionStats
	h.read(func(r *Reader) {
		for _, p := range r.Partitions(q) {
			st.Add(r.Stats(p, h.now))
		}
	})
	return st
}

// stateHash digests every bucket of the domain's state file and every
// committed message (its index entry and its record), as fsm's state hash
// does.
func (h *domain) stateHash() string {
	h.t.Helper()
	sum := sha256.New()
	err := h.db.View(func(r store.Reader) error {
		store.Digest(sum, r, buckets)
		return h.d.Reader(r).DigestMessages(sum)
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func eqList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
