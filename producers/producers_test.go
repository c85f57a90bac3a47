package producers

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// The real state file, one command's transaction per call, as apply runs
// them.
func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), Buckets, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func update(t *testing.T, db *store.DB, fn func(tx *store.Tx)) {
	t.Helper()
	if err := db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		fn(tx)
		return tx.Commit()
	}); err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, db *store.DB, fn func(r store.Reader)) {
	t.Helper()
	if err := db.View(func(r store.Reader) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
}

func initP(t *testing.T, db *store.DB, in *command.KafkaInitProducer, now int64) (res *command.KafkaInitProducerResult) {
	t.Helper()
	update(t, db, func(tx *store.Tx) { res = Init(tx, in, now) })
	return res
}

func check(t *testing.T, db *store.DB, id int64, epoch int32, pid string, base, n int32) (v Verdict) {
	t.Helper()
	view(t, db, func(r store.Reader) { v = Check(r, id, epoch, []byte(pid), base, n) })
	return answer(v)
}

// answer is what a verdict says (what Check read for Appended left out).
func answer(v Verdict) Verdict {
	return Verdict{Code: v.Code, Duplicate: v.Duplicate, BaseOffset: v.BaseOffset}
}

func appended(t *testing.T, db *store.DB, id int64, epoch int32, pid string, base, n int32, off uint64, now, idle int64) {
	t.Helper()
	update(t, db, func(tx *store.Tx) { Appended(tx, Verdict{}, id, epoch, []byte(pid), base, n, off, now, idle) })
}

// step is one batch offered to Check; an accepted one is appended at off.
type step struct {
	base, n int32
	off     uint64 // where an accepted batch lands
	want    Verdict
}

var (
	ok         = Verdict{}
	outOfOrder = Verdict{Code: kerr.OutOfOrderSequenceNumber.Code}
	dupSeq     = Verdict{Code: kerr.DuplicateSequenceNumber.Code}
)

func dup(off uint64) Verdict { return Verdict{Duplicate: true, BaseOffset: off} }

// Check against a producer's sequences in one partition: the first batch
// starts at 0, each next one follows the last, a retry of one of the last
// five is a duplicate answered with its first offset, older ones are
// DUPLICATE_SEQUENCE_NUMBER, gaps, overlaps and reorders are
// OUT_OF_ORDER_SEQUENCE_NUMBER, and sequences wrap at MaxInt32.
func TestCheckSequences(t *testing.T) {
	cases := []struct {
		name  string
		start int32 // the first batch's sequence when it is not 0 (wrap cases seed it)
		steps []step
	}{
		{"a first batch not at 0", 0, []step{{base: 5, n: 1, want: outOfOrder}, {base: 0, n: 1, off: 1, want: ok}}},
		{"in order, then a gap", 0, []step{
			{0, 3, 1, ok}, {3, 2, 4, ok}, {5, 1, 6, ok},
			{7, 1, 0, outOfOrder}, // 6 skipped
			{6, 1, 7, ok},
		}},
		{"retries of the last five", 0, []step{
			{0, 2, 10, ok}, {2, 2, 12, ok}, {4, 2, 14, ok}, {6, 2, 16, ok}, {8, 2, 18, ok},
			{0, 2, 0, dup(10)}, {4, 2, 0, dup(14)}, {8, 2, 0, dup(18)},
			{10, 2, 20, ok}, // the sixth: batch 0..1 falls out
			{0, 2, 0, dupSeq}, {2, 2, 0, dup(12)}, {10, 2, 0, dup(20)},
			{12, 1, 22, ok},
		}},
		{"a retry of a different size is no duplicate", 0, []step{
			{0, 3, 1, ok}, {3, 3, 4, ok},
			{0, 2, 0, outOfOrder}, // same first sequence, another last
			{3, 4, 0, outOfOrder},
			{1, 2, 0, outOfOrder}, // inside a kept batch
			{4, 1, 0, outOfOrder},
			{6, 1, 7, ok},
		}},
		{"a sequence from the future", 0, []step{{0, 1, 1, ok}, {100, 1, 0, outOfOrder}, {-1, 1, 0, outOfOrder}, {1, 1, 2, ok}}},
		{"wrapping at MaxInt32", math.MaxInt32 - 2, []step{
			{math.MaxInt32 - 1, 2, 5, ok}, // MaxInt32-1, MaxInt32
			{0, 3, 7, ok},                 // wraps to 0
			{math.MaxInt32 - 1, 2, 0, dup(5)},
			{3, 1, 10, ok},
			{math.MaxInt32 - 10, 1, 0, dupSeq}, // before the kept batches, across the wrap
			{5, 1, 0, outOfOrder},              // a gap past the wrap: never "appended long ago"
		}},
		{"a batch that wraps inside itself", math.MaxInt32 - 1, []step{
			{math.MaxInt32, 3, 4, ok}, // MaxInt32, 0, 1
			{math.MaxInt32, 3, 0, dup(4)},
			{2, 1, 7, ok},
			{1, 1, 0, outOfOrder},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := openDB(t)
			p := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 1)
			if c.start != 0 {
				// the state a long-lived producer reaches: one batch at start
				appended(t, db, p.ProducerId, 0, "p0", c.start, 1, 1, 2, 1e9)
			}
			for i, s := range c.steps {
				got := check(t, db, p.ProducerId, 0, "p0", s.base, s.n)
				if got != s.want {
					t.Fatalf("step %d (seq %d, %d records): %+v, want %+v", i, s.base, s.n, got, s.want)
				}
				if got == ok {
					appended(t, db, p.ProducerId, 0, "p0", s.base, s.n, s.off, 3, 1e9)
				}
			}
			// never more than five batches kept
			view(t, db, func(r store.Reader) {
				if s := seqs(r, p.ProducerId, []byte("p0")); len(s.Batches) > KeptBatches {
					t.Fatalf("%d batches kept", len(s.Batches))
				}
			})
		})
	}
}

// Sequences are per producer and partition: another partition's or
// another producer's first batch starts at 0 whatever this one is at.
func TestSequencesPerProducerAndPartition(t *testing.T) {
	db := openDB(t)
	a := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 1).ProducerId
	b := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 1).ProducerId
	if a == b || a < FirstID || b < FirstID {
		t.Fatalf("producer ids %d, %d", a, b)
	}
	appended(t, db, a, 0, "p0", 0, 5, 1, 2, 1e9)
	for _, c := range []struct {
		id   int64
		pid  string
		base int32
		want Verdict
	}{
		{a, "p0", 5, ok}, {a, "p0", 0, dup(1)},
		{a, "p1", 5, outOfOrder}, {a, "p1", 0, ok},
		{b, "p0", 5, outOfOrder}, {b, "p0", 0, ok},
	} {
		if got := check(t, db, c.id, 0, c.pid, c.base, 5); got != c.want {
			t.Errorf("producer %d partition %s seq %d: %+v, want %+v", c.id, c.pid, c.base, got, c.want)
		}
	}
}

// Epochs: an unknown id is UNKNOWN_PRODUCER_ID; a transactional id's
// InitProducerId bumps the epoch of the same id, which fences the older
// one (PRODUCER_FENCED) and starts every partition's sequences again at 0;
// an epoch never handed out, or an idempotent producer's older one, is
// INVALID_PRODUCER_EPOCH.
func TestEpochFencing(t *testing.T) {
	db := openDB(t)
	in := &command.KafkaInitProducer{TransactionalId: "tx-1", TxnTimeoutMs: 60000, IdleUs: 1e9}
	first := initP(t, db, in, 1)
	if first.ProducerEpoch != 0 {
		t.Fatalf("first epoch %d", first.ProducerEpoch)
	}
	id := first.ProducerId
	appended(t, db, id, 0, "p0", 0, 3, 1, 2, 1e9)
	second := initP(t, db, &command.KafkaInitProducer{TransactionalId: "tx-1", TxnTimeoutMs: 30000, IdleUs: 1e9}, 3)
	if second.ProducerId != id || second.ProducerEpoch != 1 {
		t.Fatalf("re-init of tx-1: id %d epoch %d, want %d epoch 1", second.ProducerId, second.ProducerEpoch, id)
	}
	view(t, db, func(r store.Reader) {
		if p := Producer(r, id); p.TxnTimeoutMs != 30000 || p.Epoch != 1 {
			t.Fatalf("record after re-init: %+v", p)
		}
		if Count(r) != 1 {
			t.Fatalf("count %d after a re-init, want 1", Count(r))
		}
		for _, c := range []struct {
			id    int64
			epoch int32
			want  int16
		}{
			{id, 1, 0},
			{id, 0, kerr.ProducerFenced.Code},
			{id, 2, kerr.InvalidProducerEpoch.Code},
			{id + 77, 0, kerr.UnknownProducerID.Code},
		} {
			if got := Current(r, c.id, c.epoch); got != c.want {
				t.Errorf("Current(%d, %d) = %d, want %d", c.id, c.epoch, got, c.want)
			}
			if got := Check(r, c.id, c.epoch, []byte("p0"), 3, 1); c.want != 0 && got.Code != c.want {
				t.Errorf("Check(%d, %d) = %+v, want code %d", c.id, c.epoch, got, c.want)
			}
		}
		// the new epoch starts again at 0 in a partition the old one wrote
		if got := answer(Check(r, id, 1, []byte("p0"), 3, 1)); got != outOfOrder {
			t.Errorf("the new epoch continuing the old one's sequence: %+v", got)
		}
		if got := answer(Check(r, id, 1, []byte("p0"), 0, 3)); got != ok {
			t.Errorf("the new epoch's first batch (a repeat of the old epoch's sequences): %+v", got)
		}
	})
	appended(t, db, id, 1, "p0", 0, 1, 9, 4, 1e9)
	if got := check(t, db, id, 1, "p0", 0, 1); got != dup(9) {
		t.Fatalf("the new epoch's retry: %+v", got)
	}

	// An idempotent producer (no transactional id) is never re-epoched by
	// Init: each call is a new id; an older epoch is invalid, not fenced.
	idem := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 5)
	again := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 5)
	if idem.ProducerId == again.ProducerId || again.ProducerEpoch != 0 {
		t.Fatalf("idempotent inits: %+v then %+v", idem, again)
	}
	view(t, db, func(r store.Reader) {
		if got := Current(r, idem.ProducerId, -1); got != kerr.InvalidProducerEpoch.Code {
			t.Errorf("an idempotent producer's older epoch: %d", got)
		}
	})
}

// An epoch that would overflow gives the transactional id a new producer
// id at epoch 0, dropping the old id and its sequences; the count stays.
func TestEpochOverflowGivesANewID(t *testing.T) {
	db := openDB(t)
	in := &command.KafkaInitProducer{TransactionalId: "tx-max", IdleUs: 1e9}
	first := initP(t, db, in, 1)
	appended(t, db, first.ProducerId, 0, "p0", 0, 1, 1, 2, 1e9)
	update(t, db, func(tx *store.Tx) {
		p := Producer(tx, first.ProducerId)
		p.Epoch = math.MaxInt16 - 2
		put(tx, p)
	})
	if r := initP(t, db, in, 3); r.ProducerId != first.ProducerId || r.ProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("the last epoch: %+v", r)
	}
	r := initP(t, db, in, 4)
	if r.ProducerId == first.ProducerId || r.ProducerEpoch != 0 {
		t.Fatalf("past the last epoch: %+v, want a new id at epoch 0", r)
	}
	view(t, db, func(rd store.Reader) {
		if Producer(rd, first.ProducerId) != nil || seqs(rd, first.ProducerId, []byte("p0")) != nil {
			t.Fatal("the old id or its sequences are still kept")
		}
		if Count(rd) != 1 {
			t.Fatalf("count %d, want 1", Count(rd))
		}
		if got := Current(rd, first.ProducerId, math.MaxInt16-1); got != kerr.UnknownProducerID.Code {
			t.Fatalf("the old id: %d", got)
		}
	})
	if again := initP(t, db, in, 5); again.ProducerId != r.ProducerId || again.ProducerEpoch != 1 {
		t.Fatalf("the transactional id after the new id: %+v", again)
	}
}

// Idle expiry: a producer is due when its idle time runs out, and the
// sweep removes it with its sequences and transactional id, at most limit
// at a time. A batch moves the expiry only when less than half the idle
// time is left.
func TestIdleExpiry(t *testing.T) {
	db := openDB(t)
	const idle = 100
	tp := initP(t, db, &command.KafkaInitProducer{TransactionalId: "tx-idle", IdleUs: idle}, 1000).ProducerId // expires 1100
	p2 := initP(t, db, &command.KafkaInitProducer{IdleUs: idle}, 1010).ProducerId                             // 1110
	p3 := initP(t, db, &command.KafkaInitProducer{IdleUs: idle}, 1020).ProducerId                             // 1120
	keep := initP(t, db, &command.KafkaInitProducer{IdleUs: idle}, 1030).ProducerId                           // 1130
	appended(t, db, tp, 0, "p0", 0, 1, 1, 1040, idle)                                                         // 60 left: no move
	appended(t, db, keep, 0, "p0", 0, 1, 2, 1090, idle)                                                       // 40 left: 1190
	view(t, db, func(r store.Reader) {
		if e := Producer(r, tp).ExpiresUs; e != 1100 {
			t.Fatalf("a batch with more than half the idle time left moved the expiry to %d", e)
		}
		if e := Producer(r, keep).ExpiresUs; e != 1190 {
			t.Fatalf("a batch with less than half the idle time left: expiry %d, want 1190", e)
		}
		if SweepDue(r, 1099) {
			t.Fatal("due before any idle time ran out")
		}
		if !SweepDue(r, 1100) {
			t.Fatal("not due when the first idle time ran out")
		}
	})
	var n int
	var more bool
	update(t, db, func(tx *store.Tx) { n, more = Sweep(tx, 1150, 2) })
	if n != 2 || !more {
		t.Fatalf("sweep limit 2: %d, more %v", n, more)
	}
	update(t, db, func(tx *store.Tx) { n, more = Sweep(tx, 1150, 2) })
	if n != 1 || more {
		t.Fatalf("second sweep: %d, more %v", n, more)
	}
	view(t, db, func(r store.Reader) {
		for _, id := range []int64{tp, p2, p3} {
			if Producer(r, id) != nil {
				t.Errorf("producer %d idle past its time is kept", id)
			}
			if got := Check(r, id, 0, []byte("p0"), 1, 1); got.Code != kerr.UnknownProducerID.Code {
				t.Errorf("a swept producer's batch: %+v", got)
			}
		}
		if seqs(r, tp, []byte("p0")) != nil {
			t.Error("a swept producer's sequences are kept")
		}
		if Producer(r, keep) == nil || Count(r) != 1 {
			t.Fatalf("the busy producer: %v, count %d", Producer(r, keep), Count(r))
		}
		if SweepDue(r, 1150) {
			t.Fatal("still due after the sweep")
		}
	})
	// The transactional id went with its producer: a new id at epoch 0.
	if r := initP(t, db, &command.KafkaInitProducer{TransactionalId: "tx-idle", IdleUs: idle}, 1200); r.ProducerId == tp || r.ProducerEpoch != 0 {
		t.Fatalf("the swept transactional id: %+v", r)
	}
	// A zero idle time is kept for the least: it expires one microsecond on.
	z := initP(t, db, &command.KafkaInitProducer{}, 2000).ProducerId
	view(t, db, func(r store.Reader) {
		if e := Producer(r, z).ExpiresUs; e != 2001 {
			t.Fatalf("zero idle: expiry %d", e)
		}
	})
}

// The cap: past MaxProducers, Init removes the producer whose expiry
// comes first (the least recently used) and says how many went; a
// transactional re-init does not count as a new one.
func TestCapEvictsTheLeastRecentlyUsed(t *testing.T) {
	db := openDB(t)
	const idle = 100
	in := func(txn string) *command.KafkaInitProducer {
		return &command.KafkaInitProducer{TransactionalId: txn, MaxProducers: 3, IdleUs: idle}
	}
	p1 := initP(t, db, in(""), 0).ProducerId        // expires 100
	p2 := initP(t, db, in("t2"), 10).ProducerId     // 110
	p3 := initP(t, db, in(""), 20).ProducerId       // 120
	appended(t, db, p1, 0, "p0", 0, 1, 1, 60, idle) // p1 used: 160
	if r := initP(t, db, in("t2"), 65); r.Evicted != 0 || r.ProducerId != p2 || r.ProducerEpoch != 1 {
		t.Fatalf("a transactional re-init at the cap: %+v", r) // p2 now expires 165
	}
	r4 := initP(t, db, in(""), 70)
	if r4.Evicted != 1 {
		t.Fatalf("the fourth producer under a cap of 3 evicted %d", r4.Evicted)
	}
	view(t, db, func(r store.Reader) {
		if Producer(r, p3) != nil {
			t.Error("the least recently used (p3) is kept")
		}
		for _, id := range []int64{p1, p2, r4.ProducerId} {
			if Producer(r, id) == nil {
				t.Errorf("producer %d evicted", id)
			}
		}
		if Count(r) != 3 {
			t.Errorf("count %d, want 3", Count(r))
		}
		if got := Check(r, p3, 0, []byte("p0"), 0, 1); got.Code != kerr.UnknownProducerID.Code {
			t.Errorf("an evicted producer's batch: %+v", got)
		}
	})
	// A cap lowered below the count evicts down to it in one Init.
	r := initP(t, db, &command.KafkaInitProducer{MaxProducers: 1, IdleUs: idle}, 80)
	if r.Evicted != 3 {
		t.Fatalf("a cap of 1 over 3 kept: evicted %d", r.Evicted)
	}
	view(t, db, func(rd store.Reader) {
		if Count(rd) != 1 || Producer(rd, r.ProducerId) == nil {
			t.Fatalf("count %d", Count(rd))
		}
	})
	// MaxProducers 0 is no cap.
	for range 5 {
		if r := initP(t, db, &command.KafkaInitProducer{IdleUs: idle}, 90); r.Evicted != 0 {
			t.Fatalf("no cap evicted %d", r.Evicted)
		}
	}
	view(t, db, func(rd store.Reader) {
		if Count(rd) != 6 {
			t.Fatalf("count %d, want 6", Count(rd))
		}
	})
}

// Appended with Check's verdict (what apply does: one read of the state
// per batch) leaves what Appended reading afresh leaves.
func TestAppendedWithTheVerdictMatchesAFreshRead(t *testing.T) {
	states := [2][]byte{}
	for i, useVerdict := range []bool{false, true} {
		db := openDB(t)
		p := initP(t, db, &command.KafkaInitProducer{IdleUs: 1e9}, 1)
		for seq := int32(0); seq < 40; seq += 4 {
			update(t, db, func(tx *store.Tx) {
				v := Check(tx, p.ProducerId, 0, []byte("p0"), seq, 4)
				if v.Code != 0 || v.Duplicate {
					t.Fatalf("seq %d: %+v", seq, answer(v))
				}
				if !useVerdict {
					v = Verdict{}
				}
				Appended(tx, v, p.ProducerId, 0, []byte("p0"), seq, 4, uint64(seq+1), int64(seq)*1e8, 1e9)
			})
		}
		view(t, db, func(r store.Reader) {
			states[i] = append(r.Get(bSeqs, seqKey(p.ProducerId, []byte("p0"))), r.Get(bProducers, idKey(p.ProducerId))...)
		})
	}
	if string(states[0]) != string(states[1]) || len(states[0]) == 0 {
		t.Fatalf("state after Appended with the verdict differs from a fresh read's:\n%x\n%x", states[0], states[1])
	}
}
