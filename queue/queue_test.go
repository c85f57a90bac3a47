package queue

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/traces"
)

// domain is one queue domain over its own state file and message store,
// driven the way the FSM drives it: one Tx per command, one state-file
// batch and one message-store batch per "entry", committed in that order.
type domain struct {
	t     *testing.T
	db    *store.DB
	msgs  *msgstore.Store
	d     *Domain
	index uint64
	now   int64
	// stamped: entries take their time as the FSM gives it (newStamped):
	// now is the proposer's clock, which only the test moves, and each
	// entry is at now, or 1 µs after the previous entry when that is
	// later. Otherwise every entry moves now on by 1 ms and is at now.
	stamped bool
	last    int64 // the time of the last entry (stamped)
}

// buckets are the buckets of a domain's state file: the queue domain's
// and those of the packages it writes through (leases, traces).
var buckets = append(append(slices.Clone(Buckets), leases.Buckets...), traces.Buckets...)

func newDomain(t *testing.T, logID string) *domain {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "state.db"), buckets, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := msgstore.Open(filepath.Join(dir, "messages"), msgstore.Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(); msgs.Close() })
	return &domain{t: t, db: db, msgs: msgs, d: New(logID, msgs), now: 1_700_000_000_000_000}
}

// entryTime is the time of the next entry.
func (h *domain) entryTime() int64 {
	if !h.stamped {
		h.now += 1000
		return h.now
	}
	h.last = max(h.now, h.last+1)
	return h.last
}

// apply runs fn as the command of the next entry; keep=false discards it
// as apply does a command that is refused as a whole.
func (h *domain) apply(keep bool, fn func(tx *Tx)) {
	h.t.Helper()
	h.entry(func(tx *Tx) bool { fn(tx); return keep })
}

// entry runs fn as the command of the next entry and keeps its writes when
// fn returns true, as the FSM keeps a handler's (fsm.Kind.Apply): false
// discards every write of the command.
func (h *domain) entry(fn func(tx *Tx) bool) {
	h.t.Helper()
	h.index++
	now := h.entryTime()
	batch := h.msgs.Begin()
	err := h.db.Update(func(b *store.Batch) error {
		stx := b.Begin()
		tx := h.d.Begin(stx, batch, h.index, now)
		if !fn(tx) {
			stx.Discard()
			tx.Discard()
			return batch.Flush()
		}
		tx.Keep()
		if err := stx.Commit(); err != nil {
			return err
		}
		return batch.Flush()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	batch.Done()
}

func (h *domain) push(items ...*command.PushItem) []*command.PushItemResult {
	h.t.Helper()
	var out []*command.PushItemResult
	h.apply(true, func(tx *Tx) {
		for _, it := range items {
			out = append(out, tx.Push(it))
		}
	})
	return out
}

func (h *domain) pop(in *command.Pop) *command.PopResult {
	h.t.Helper()
	var out *command.PopResult
	h.apply(true, func(tx *Tx) { out = tx.Pop(in, false, GroupPolicy) })
	return out
}

// popUnder pops as an entry of the log format whose rule is rule.
func (h *domain) popUnder(rule ConflationRule, in *command.Pop) *command.PopResult {
	h.t.Helper()
	var out *command.PopResult
	h.apply(true, func(tx *Tx) { out = tx.Pop(in, false, rule) })
	return out
}

func (h *domain) ack(items ...*command.AckItem) []*command.AckItemResult {
	h.t.Helper()
	var out []*command.AckItemResult
	h.apply(true, func(tx *Tx) { out = tx.Acks(items, false, nil) })
	return out
}

func (h *domain) read(fn func(rd *Reader)) {
	h.t.Helper()
	if err := h.db.View(func(r store.Reader) error { fn(h.d.Reader(r)); return nil }); err != nil {
		h.t.Fatal(err)
	}
}

// item is a push item as the proposer hands it over: with its message id
// minted (here: one per call, so two items of one txn differ in id), and
// the default partition when it names none.
func item(queue, partition, txn string) *command.PushItem {
	if partition == "" {
		partition = DefaultPartition
	}
	itemSeq++
	id := make([]byte, 16)
	copy(id, fmt.Sprintf("%016d", itemSeq))
	return &command.PushItem{Queue: queue, Partition: partition, TransactionId: txn, MessageId: id,
		Payload: []byte(fmt.Sprintf(`{"txn":%q}`, txn))}
}

var itemSeq int

func txns(res *command.PopResult, rd *Reader) []string {
	var out []string
	for _, m := range res.Messages {
		out = append(out, rd.Message(m.PartitionId, m.Seq).TransactionId)
	}
	return out
}

func TestPushPopAckWithoutTheFSM(t *testing.T) {
	h := newDomain(t, "0")
	res := h.push(item("orders", "eu", "o1"), item("orders", "eu", "o2"), item("orders", "eu", "o1"))
	if res[0].Status != command.PushItemResult_QUEUED || res[1].Status != command.PushItemResult_QUEUED ||
		res[2].Status != command.PushItemResult_DUPLICATE {
		t.Fatalf("push statuses: %v", res)
	}
	if res[0].Offset != 1 || res[1].Offset != 2 {
		t.Fatalf("offsets are positions in the partition: %d %d", res[0].Offset, res[1].Offset)
	}
	if len(res[0].MessageId) != 16 || !bytes.Equal(res[2].MessageId, res[0].MessageId) {
		t.Fatalf("a duplicate answers with the stored message's id: %x, first %x", res[2].MessageId, res[0].MessageId)
	}
	pr := h.pop(&command.Pop{Queue: "orders", Batch: 10, LeaseId: "lease-1"})
	h.read(func(rd *Reader) {
		if got := txns(pr, rd); !slices.Equal(got, []string{"o1", "o2"}) {
			t.Fatalf("popped %v", got)
		}
		if m := rd.Message(pr.Messages[0].PartitionId, 1); string(m.Payload) != `{"txn":"o1"}` {
			t.Fatalf("stored payload %s", m.Payload)
		}
	})
	if again := h.pop(&command.Pop{Queue: "orders", Batch: 10, LeaseId: "lease-2"}); len(again.Messages) != 0 {
		t.Fatal("a leased partition delivers nothing to a second pop")
	}
	acks := h.ack(&command.AckItem{TransactionId: "o1", PartitionId: pr.Messages[0].PartitionId, LeaseId: "lease-1"},
		&command.AckItem{TransactionId: "o2", PartitionId: pr.Messages[0].PartitionId, LeaseId: "lease-1"})
	for _, a := range acks {
		if !a.Success {
			t.Fatalf("ack: %v", a)
		}
	}
	h.read(func(rd *Reader) {
		st := rd.Stats(rd.Partitions("orders")[0], h.now)
		if st.Completed != 2 || st.Pending != 0 || st.Processing != 0 {
			t.Fatalf("stats after acking both: %+v", st)
		}
	})
	// A refused command leaves nothing behind: neither its messages nor
	// its dedup entries.
	h.apply(false, func(tx *Tx) { tx.Push(item("orders", "eu", "o3")) })
	if r := h.push(item("orders", "eu", "o3")); r[0].Status != command.PushItemResult_QUEUED || r[0].Offset != 3 {
		t.Fatalf("after a discarded push of o3, o3 is new at offset 3: %v", r[0])
	}
}

func TestTwoDomainsSideBySide(t *testing.T) {
	a, b := newDomain(t, "log-a"), newDomain(t, "log-b")
	// The same commands at the same indexes and times in two logs.
	for _, h := range []*domain{a, b} {
		h.push(item("q", "p", "m1"), item("q", "p", "m2"))
	}
	var qa, qb *command.QueueRecord
	var pa, pb *command.PartitionRecord
	a.read(func(rd *Reader) { qa, pa = rd.Queue("q"), rd.Partitions("q")[0] })
	b.read(func(rd *Reader) { qb, pb = rd.Queue("q"), rd.Partitions("q")[0] })
	if bytes.Equal(qa.Id, qb.Id) || bytes.Equal(pa.Id, pb.Id) {
		t.Fatal("ids derived from a log index must name the log: two logs minted the same id")
	}
	// Each domain sees only its own messages and cursors.
	a.push(item("q", "p", "only-in-a"))
	ra := a.pop(&command.Pop{Queue: "q", Batch: 10, LeaseId: "l"})
	rb := b.pop(&command.Pop{Queue: "q", Batch: 10, LeaseId: "l"})
	a.read(func(rd *Reader) {
		if got := txns(ra, rd); !slices.Equal(got, []string{"m1", "m2", "only-in-a"}) {
			t.Fatalf("domain a popped %v", got)
		}
	})
	b.read(func(rd *Reader) {
		if got := txns(rb, rd); !slices.Equal(got, []string{"m1", "m2"}) {
			t.Fatalf("domain b popped %v", got)
		}
	})
	// Dedup is per domain: b has never seen only-in-a.
	if r := b.push(item("q", "p", "only-in-a")); r[0].Status != command.PushItemResult_QUEUED {
		t.Fatalf("dedup leaked across domains: %v", r[0])
	}
	if r := a.push(item("q", "p", "only-in-a")); r[0].Status != command.PushItemResult_DUPLICATE {
		t.Fatalf("dedup lost within a domain: %v", r[0])
	}
}

func TestDedupIndexIsRebuiltFromTheSegmentsAfterReset(t *testing.T) {
	h := newDomain(t, "0")
	for i := 0; i < 200; i++ { // several 4 KiB segments
		h.push(item("q", "p", fmt.Sprintf("t%03d", i)))
	}
	h.d.Reset() // as after a restore or a restart: nothing in memory
	res := h.push(item("q", "p", "t007"), item("q", "p", "t199"), item("q", "p", "t200"))
	if res[0].Status != command.PushItemResult_DUPLICATE || res[1].Status != command.PushItemResult_DUPLICATE ||
		res[2].Status != command.PushItemResult_QUEUED {
		t.Fatalf("after Reset: %v %v %v", res[0].Status, res[1].Status, res[2].Status)
	}
	if res[2].Offset != 201 {
		t.Fatalf("offset after 200 messages: %d", res[2].Offset)
	}
}

func TestLeaseExpiryRedeliversAndTheSweepCostsWhatExpires(t *testing.T) {
	h := newDomain(t, "0")
	h.apply(true, func(tx *Tx) {
		tx.Configure(&command.Configure{Queue: "q", Options: &command.QueueOptions{LeaseTime: ptr(int64(1))}})
	})
	h.push(item("q", "p1", "a"), item("q", "p2", "b"))
	first := h.pop(&command.Pop{Queue: "q", Batch: 2, Partitions: 2, LeaseId: "l1"})
	if len(first.Messages) != 2 {
		t.Fatalf("popped %d", len(first.Messages))
	}
	h.now += 2_000_000 // both leases ran out
	var swept int
	h.apply(true, func(tx *Tx) { swept, _ = tx.SweepLeases(100) })
	if swept != 2 {
		t.Fatalf("swept %d leases, want 2", swept)
	}
	h.apply(true, func(tx *Tx) { swept, _ = tx.SweepLeases(100) })
	if swept != 0 {
		t.Fatalf("a second sweep found %d", swept)
	}
	again := h.pop(&command.Pop{Queue: "q", Batch: 2, Partitions: 2, LeaseId: "l2"})
	if len(again.Messages) != 2 || again.Messages[0].RetryCount != 0 {
		t.Fatalf("redelivery after expiry: %v", again.Messages)
	}
}

func TestPopReadinessCountsDeliverablePartitions(t *testing.T) {
	h := newDomain(t, "0")
	for i := 0; i < 5; i++ {
		h.push(item("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i)))
	}
	h.pop(&command.Pop{Queue: "q", Batch: 1, LeaseId: "first"}) // records the group, leases one partition
	h.read(func(rd *Reader) {
		if r := rd.PopReadiness(&command.Pop{Queue: "q"}, h.now, 10); !r.Ready || r.Partitions != 4 {
			t.Fatalf("readiness with limit 10: %+v", r)
		}
		if r := rd.PopReadiness(&command.Pop{Queue: "q"}, h.now, 2); !r.Ready || r.Partitions != 2 {
			t.Fatalf("readiness with limit 2: %+v", r)
		}
		if r := rd.PopReadiness(&command.Pop{Queue: "nope"}, h.now, 2); r.Ready {
			t.Fatalf("a queue that does not exist is ready: %+v", r)
		}
	})
}

func ptr[T any](v T) *T { return &v }
