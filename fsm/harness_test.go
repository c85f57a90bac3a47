package fsm

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/store"
)

// harness drives an FSM directly with encoded entries, as Raft would, and
// records them so they can be replayed.
type harness struct {
	t     *testing.T
	f     *FSM
	db    *store.DB
	index uint64
	now   int64
	log   []*raft.Log
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	f, db := freshFSM(t)
	return &harness{t: t, f: f, db: db, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}
}

// freshFSM is an FSM over an empty state file and message store in a new
// temp dir, opened as the node opens them (commits every CommitEvery
// batches), without the fsync before snapshots.
func freshFSM(t *testing.T) (*FSM, *store.DB) {
	t.Helper()
	f := openFSM(t, t.TempDir(), CommitEvery)
	return f, f.db
}

// openFSM is an FSM over the state file and message files in dir, the
// state file committing once per commitEvery batches.
func openFSM(t *testing.T, dir string, commitEvery int) *FSM {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "fsm.db"), Buckets, store.Options{NoSync: true, CommitEvery: commitEvery, CommitAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := msgstore.Open(filepath.Join(dir, "messages"), msgstore.Options{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(); msgs.Close() })
	f, err := New(db, msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (h *harness) advance(d time.Duration) { h.now += d.Microseconds() }

func (h *harness) entry(cmd *command.Command) *raft.Log {
	cmd.StampUs = h.now
	data, err := command.Encode(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	l := &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data}
	h.log = append(h.log, l)
	return l
}

func (h *harness) apply(cmd *command.Command) proto.Message {
	h.t.Helper()
	res := h.f.Apply(h.entry(cmd))
	if r, ok := res.(*command.Response); ok && r.InternalError != "" {
		h.t.Fatalf("internal error: %s", r.InternalError)
	}
	return res.(proto.Message)
}

func newMsgID() []byte { id := uuid.Must(uuid.NewV7()); return id[:] }

func item(q, partition, txn string) *command.PushItem {
	if partition == "" {
		partition = queue.DefaultPartition
	}
	return &command.PushItem{Queue: q, Partition: partition, TransactionId: txn,
		Payload: []byte(fmt.Sprintf(`{"txn":%q}`, txn)), MessageId: newMsgID()}
}

func (h *harness) push(items ...*command.PushItem) []*command.PushItemResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}}).(*command.PushResult).Items
}

func (h *harness) configure(queue string, o *command.QueueOptions) *command.ConfigureResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Configure{Configure: &command.Configure{Queue: queue, Options: o}}}).(*command.ConfigureResult)
}

type popOpt func(*command.Pop)

func group(g string) popOpt      { return func(p *command.Pop) { p.ConsumerGroup = g } }
func batch(n uint32) popOpt      { return func(p *command.Pop) { p.Batch = n } }
func partitions(n uint32) popOpt { return func(p *command.Pop) { p.Partitions = n } }
func fromAll() popOpt            { return func(p *command.Pop) { p.Subscription = command.Pop_DEFAULT_ALL } }
func autoAck() popOpt            { return func(p *command.Pop) { p.AutoAck = true } }
func onPartition(n string) popOpt {
	return func(p *command.Pop) { p.Partition, p.HasPartition = n, true }
}

func (h *harness) pop(queue string, opts ...popOpt) *command.PopResult {
	h.t.Helper()
	p := &command.Pop{Queue: queue, Batch: 1, Partitions: 1, LeaseId: uuid.NewString()}
	for _, o := range opts {
		o(p)
	}
	return h.apply(&command.Command{Body: &command.Command_Pop{Pop: p}}).(*command.PopResult)
}

// txns returns the transactionIds of a pop, in order.
func (h *harness) txns(pr *command.PopResult) []string {
	h.t.Helper()
	var out []string
	h.read(func(r *Reader) {
		for _, m := range pr.Messages {
			if rec := r.Message(m.PartitionId, m.Seq); rec != nil {
				out = append(out, rec.TransactionId)
			} else {
				out = append(out, "(deleted)")
			}
		}
	})
	return out
}

func (h *harness) read(fn func(r *Reader)) {
	h.t.Helper()
	if err := h.f.Read(func(r *Reader) error { fn(r); return nil }); err != nil {
		h.t.Fatal(err)
	}
}

// ackOf builds an ack item for the i-th message of a pop.
func (h *harness) ackOf(pr *command.PopResult, i int, status command.AckStatus) *command.AckItem {
	h.t.Helper()
	m := pr.Messages[i]
	return &command.AckItem{TransactionId: h.txns(pr)[i], PartitionId: m.PartitionId,
		ConsumerGroup: groupArg(pr.ConsumerGroup), LeaseId: pr.LeaseId, Status: status}
}

func groupArg(g string) string {
	if g == command.QueueModeGroup {
		return ""
	}
	return g
}

func (h *harness) ack(items ...*command.AckItem) []*command.AckItemResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: items}}}).(*command.AckResult).Items
}

// ackAll acks every message of a pop as completed in one entry.
func (h *harness) ackAll(pr *command.PopResult, status command.AckStatus) []*command.AckItemResult {
	h.t.Helper()
	var items []*command.AckItem
	for i := range pr.Messages {
		items = append(items, h.ackOf(pr, i, status))
	}
	return h.ack(items...)
}

// stateHash digests every bucket of the state file and every committed
// message (its index entry and its record).
func stateHash(t *testing.T, f *FSM) string {
	return stateHashOf(t, f, stateBuckets(f.meta))
}

func stateHashOf(t *testing.T, f *FSM, buckets []store.Bucket) string {
	t.Helper()
	var h string
	err := f.db.View(func(r store.Reader) error {
		var err error
		h, err = f.hashOf(r, f.meta, buckets)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// stateHashWithoutMeta digests what stateHash does but the meta record,
// which moves with every entry.
func stateHashWithoutMeta(t *testing.T, h *harness) string {
	t.Helper()
	return stateHashOf(t, h.f, Buckets[1:])
}

func ptr[T any](v T) *T { return &v }

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
