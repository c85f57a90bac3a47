package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
)

// workload drives a harness through a seeded mix of every command kind and
// returns the recorded log.
func workload(t *testing.T, seed int64, steps int) *harness {
	h := newHarness(t)
	rng := rand.New(rand.NewSource(seed))
	queues := []string{"q1", "q2", "billing.inv"}
	groups := []string{"", "g1", "g2"}
	var pops []*command.PopResult
	h.configure("q1", &command.QueueOptions{LeaseTime: ptr(int64(2)), RetryLimit: ptr(int64(1)), RetryDelay: ptr(int64(300)),
		DedupWindowSeconds: ptr(int64(5))})
	h.configure("q2", &command.QueueOptions{RetentionEnabled: ptr(true), RetentionSeconds: ptr(int64(20)), CompletedRetentionSeconds: ptr(int64(3))})
	h.configure("billing.inv", &command.QueueOptions{MaxWaitTimeSeconds: ptr(int64(6))})
	lockRng := rand.New(rand.NewSource(seed + 1000)) // its own stream: the mix above stays as it was
	for i := 0; i < steps; i++ {
		h.advance(time.Duration(rng.Intn(400)) * time.Millisecond)
		if lockRng.Intn(5) == 0 {
			lockStep(h, lockRng)
		}
		q := queues[rng.Intn(len(queues))]
		switch k := rng.Intn(13); {
		case k < 3:
			var items []*command.PushItem
			for n := rng.Intn(4) + 1; n > 0; n-- {
				items = append(items, item(q, fmt.Sprint("p", rng.Intn(3)), fmt.Sprint("t", rng.Intn(60))))
			}
			h.push(items...)
		case k < 6:
			g := groups[rng.Intn(len(groups))]
			opts := []popOpt{group(g), batch(uint32(rng.Intn(4) + 1)), partitions(uint32(rng.Intn(2) + 1))}
			if rng.Intn(2) == 0 {
				opts = append(opts, fromAll())
			}
			if r := h.pop(q, opts...); len(r.Messages) > 0 {
				pops = append(pops, r)
			}
		case k < 9 && len(pops) > 0:
			r := pops[rng.Intn(len(pops))]
			status := []command.AckStatus{command.AckStatus_COMPLETED, command.AckStatus_COMPLETED, command.AckStatus_FAILED, command.AckStatus_RETRY, command.AckStatus_DLQ}[rng.Intn(5)]
			i := rng.Intn(len(r.Messages))
			if rng.Intn(3) == 0 {
				h.txn(&command.Transaction{
					Ops: []*command.TxnOp{ackOp(h.ackOf(r, i, status)), pushOp(item("out", "", fmt.Sprint("o", rng.Intn(50))))},
					Kv:  []*command.KVOp{marker(fmt.Sprint("m", rng.Intn(20)), rng.Intn(2) == 0)},
				})
			} else {
				h.ack(h.ackOf(r, i, status))
			}
		case k == 9 && len(pops) > 0:
			r := pops[rng.Intn(len(pops))]
			h.apply(&command.Command{Body: &command.Command_ExtendLease{ExtendLease: &command.ExtendLease{LeaseId: r.LeaseId, Seconds: 5}}})
		case k == 10:
			h.apply(&command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: []*command.KVOp{
				{Kind: command.KVOp_INCR, Ns: "c", Key: "n", Delta: 1, TtlSeconds: 2},
				{Kind: command.KVOp_PUT, Ns: "c", Key: fmt.Sprint("k", rng.Intn(5)), Value: []byte(`1`), TtlSeconds: int64(rng.Intn(3) + 1)},
			}}}})
		case k == 12 && rng.Intn(2) == 0 && len(pops) > 0:
			// Messages and dead letters: delete, trace, replay, purge.
			for n := 0; n < 3; n++ {
				h.messageOp(rng, queues[rng.Intn(len(queues))], pops[rng.Intn(len(pops))])
			}
		case k == 12 && rng.Intn(2) == 0:
			key := fmt.Sprint("tk", rng.Intn(8))
			if rng.Intn(3) == 0 {
				h.timers(cancel(q, key))
			} else {
				h.timers(schedule(q, key, fmt.Sprint("tt", rng.Intn(20)), time.Duration(rng.Intn(3000))*time.Millisecond))
			}
			h.fire()
		case k == 11:
			// Operator writes: a seek, a group deletion, a subscription
			// change, push maintenance on or off, a drain step.
			g := groups[rng.Intn(len(groups))]
			if g == "" {
				g = command.QueueModeGroup
			}
			var cmd *command.Command
			switch rng.Intn(5) {
			case 0:
				cmd = &command.Command{Body: &command.Command_Seek{Seek: &command.Seek{Group: g, Queue: q, ToEnd: rng.Intn(2) == 0,
					TimestampUs: h.now - int64(rng.Intn(5000))*1000}}}
			case 1:
				cmd = &command.Command{Body: &command.Command_Seek{Seek: &command.Seek{Group: g, Queue: q, Partition: fmt.Sprint("p", rng.Intn(3)), OnePartition: true}}}
			case 2:
				cmd = &command.Command{Body: &command.Command_DeleteGroup{DeleteGroup: &command.DeleteGroup{Group: g, Queue: []string{q, ""}[rng.Intn(2)], DeleteMetadata: rng.Intn(2) == 0}}}
			case 3:
				cmd = &command.Command{Body: &command.Command_SetSubscription{SetSubscription: &command.SetSubscription{Group: g, FromUs: h.now - 1e6}}}
			default:
				on := rng.Intn(3) == 0
				cmd = &command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: &on}}}
			}
			h.apply(cmd)
			h.apply(&command.Command{Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{Limit: 3}}})
		default:
			if rng.Intn(8) == 0 {
				h.apply(&command.Command{Body: &command.Command_DeleteQueue{DeleteQueue: &command.DeleteQueue{Queue: q}}})
			}
			h.apply(&command.Command{Body: &command.Command_Sweep{Sweep: &command.Sweep{Limit: 7}}})
			var after []byte
			for { // a whole retention pass, two partitions an entry
				r := h.apply(&command.Command{Body: &command.Command_Retain{Retain: &command.Retain{After: after, Limit: 2, PartitionIdleUs: 8e6}}}).(*command.RetainResult)
				if after = r.Next; len(after) == 0 {
					break
				}
			}
		}
	}
	return h
}

// TestReplayIsDeterministic replays one recorded log into two fresh FSMs
// and compares their whole state after every entry (DESIGN.md invariant 2).
// One replica applies entry by entry, the other in batches of varying size,
// as group commit would hand them over.
func TestReplayIsDeterministic(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			src := workload(t, seed, 400)
			a, _ := freshFSM(t)
			b, _ := freshFSM(t)
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < len(src.log); {
				n := min(rng.Intn(8)+1, len(src.log)-i)
				b.ApplyBatch(src.log[i : i+n])
				for _, l := range src.log[i : i+n] {
					a.Apply(l)
				}
				i += n
				if ha, hb := stateHash(t, a), stateHash(t, b); ha != hb {
					t.Fatalf("replicas diverged after entry %d", i)
				}
			}
			if stateHash(t, a) != stateHash(t, src.f) {
				t.Fatal("replay differs from the original run")
			}
		})
	}
}

// TestReplayAfterRestartSkipsAppliedEntries: a node that restarts replays
// the log after its snapshot; entries its state file already holds must not
// apply twice (DESIGN.md, the storage trap).
func TestReplayAfterRestartSkipsAppliedEntries(t *testing.T) {
	src := workload(t, 7, 200)
	want := stateHash(t, src.f)
	// Re-open the FSM over the same files, as after kill -9, and replay the
	// whole log from index 1 as Raft would from an old snapshot.
	msgs, err := msgstore.Open(src.f.msgs.Dir(), msgstore.Options{SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(src.db, msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "applied index survives", f.AppliedIndex(), src.index)
	for _, l := range src.log {
		f.Apply(l)
	}
	eq(t, "state after replay", stateHash(t, f), want)
}

// TestSnapshotRestoreRoundTrip compares every table after persisting a
// snapshot and restoring it into a fresh FSM, and checks that a restored
// replica keeps applying identically.
func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := workload(t, 11, 300)
	image := snapshotOf(t, src.f)
	dst, _ := freshFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(image))); err != nil {
		t.Fatal(err)
	}
	eq(t, "state", stateHash(t, dst), stateHash(t, src.f))
	eq(t, "applied", dst.AppliedIndex(), src.f.AppliedIndex())
	// Both keep going in lockstep.
	more := workload(t, 12, 50)
	for _, l := range more.log {
		l2 := *l
		l2.Index += src.index
		src.f.Apply(&l2)
		dst.Apply(&l2)
	}
	eq(t, "state after more entries", stateHash(t, dst), stateHash(t, src.f))
}

// snapshotOf takes a snapshot of f and returns its persisted bytes.
func snapshotOf(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

// TestUnknownCommandPanicsUnlessSkippable: a replica that does not know a
// command must not silently diverge.
func TestUnknownCommandPanicsUnlessSkippable(t *testing.T) {
	h := newHarness(t)
	h.push(item("q", "", "a"))
	before := stateHashWithoutMeta(t, h)
	skip := h.entry(&command.Command{Skippable: true})
	if r := h.f.Apply(skip); r != nil {
		t.Fatalf("a skipped command answered %v", r)
	}
	eq(t, "a skipped command changes nothing", stateHashWithoutMeta(t, h), before)
	eq(t, "but its index counts as applied", h.f.AppliedIndex(), skip.Index)
	defer func() {
		if recover() == nil {
			t.Fatal("unknown command did not panic")
		}
	}()
	h.f.Apply(h.entry(&command.Command{}))
}

// messageOp applies one of the message commands: a deletion or a trace of
// a delivered message, a replay of one of q's dead letters (by id or by
// message, to its own partition or another queue), or a purge.
func (h *harness) messageOp(rng *rand.Rand, q string, r *command.PopResult) {
	m := r.Messages[rng.Intn(len(r.Messages))]
	var txn string
	var dls []*command.DLQRecord
	h.read(func(rd *Reader) {
		if rec := rd.Message(m.PartitionId, m.Seq); rec != nil {
			txn = rec.TransactionId
		}
		dls, _, _ = rd.DeadLetters(DLQFilter{Queue: q, Limit: 20})
	})
	switch rng.Intn(6) {
	case 0:
		h.apply(&command.Command{Body: &command.Command_DeleteMessage{DeleteMessage: &command.DeleteMessage{
			PartitionId: m.PartitionId, Seq: m.Seq, TransactionId: txn}}})
	case 1:
		h.apply(&command.Command{Body: &command.Command_RecordTrace{RecordTrace: &command.RecordTrace{
			PartitionId: m.PartitionId, Seq: m.Seq, TransactionId: txn, TraceNames: []string{fmt.Sprint("n", rng.Intn(3))},
			EventType: "info", Data: []byte(`{"k":1}`), TraceId: []byte(fmt.Sprintf("%016d", h.now))}}})
	case 2, 3, 4:
		if len(dls) == 0 {
			return
		}
		d := dls[rng.Intn(len(dls))]
		in := &command.ReplayDeadLetter{RecordId: d.RecordId, SourceQueue: d.Queue, MessageId: []byte(fmt.Sprintf("%016d", h.now))}
		if rng.Intn(2) == 0 {
			in.RecordId, in.PartitionId, in.TransactionId, in.ConsumerGroup = nil, d.PartitionId, d.TransactionId, d.ConsumerGroup
		}
		if rng.Intn(3) == 0 {
			in.Queue, in.Partition = "replayed", fmt.Sprint("p", rng.Intn(2))
		}
		h.apply(&command.Command{Body: &command.Command_ReplayDeadLetter{ReplayDeadLetter: in}})
	default:
		h.apply(&command.Command{Body: &command.Command_PurgeDeadLetters{PurgeDeadLetters: &command.PurgeDeadLetters{
			Queue: q, ConsumerGroup: []string{"", "g1"}[rng.Intn(2)], Limit: 2}}})
	}
}
