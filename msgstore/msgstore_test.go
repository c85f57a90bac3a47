package msgstore

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var pidA = []byte("AAAAAAAAAAAAAAAA")
var pidB = []byte("BBBBBBBBBBBBBBBB")

func msg(seq uint64) *Message {
	return &Message{ID: bytes.Repeat([]byte{byte(seq)}, 16), TxnID: fmt.Sprint("txn-", seq), TraceID: "t",
		ProducerSub: "p", CreatedUs: int64(1000 + seq), Payload: []byte(fmt.Sprintf(`{"n":%d}`, seq))}
}

func mustOpen(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendAll appends seqs from..to of pid in one batch and flushes it.
func appendAll(t *testing.T, s *Store, pid []byte, from, to uint64) {
	t.Helper()
	b := s.Begin()
	for seq := from; seq <= to; seq++ {
		if err := b.Append(pid, 1, seq, msg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	b.Done()
}

func checkMessages(t *testing.T, s *Store, pid []byte, from, to uint64) {
	t.Helper()
	ms, err := s.Messages(pid, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(ms)) != to-from+1 {
		t.Fatalf("read %d messages of %d..%d", len(ms), from, to)
	}
	for i, m := range ms {
		want := msg(from + uint64(i))
		if m.TxnID != want.TxnID || string(m.Payload) != string(want.Payload) || m.CreatedUs != want.CreatedUs ||
			!bytes.Equal(m.ID, want.ID) || m.TraceID != "t" || m.ProducerSub != "p" {
			t.Fatalf("seq %d: %+v, want %+v", from+uint64(i), m, want)
		}
	}
}

func TestAppendReadAndRoll(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	appendAll(t, s, pidA, 1, 40)
	appendAll(t, s, pidB, 1, 3)
	appendAll(t, s, pidA, 41, 50)
	checkMessages(t, s, pidA, 1, 50)
	checkMessages(t, s, pidA, 17, 33)
	checkMessages(t, s, pidB, 1, 3)
	segs, _ := filepath.Glob(filepath.Join(s.Dir(), partKey(pidA), "*.log"))
	if len(segs) < 5 {
		t.Fatalf("%d segments for 50 records of ~45 bytes at 300 bytes a segment", len(segs))
	}
	e, err := s.Entry(pidA, 7)
	if err != nil || e.CreatedUs != 1007 || e.TxnHash != TxnHash("txn-7") {
		t.Fatalf("entry: %+v %v", e, err)
	}
	if _, err := s.Message(pidA, 51); !errors.Is(err, ErrNotFound) {
		t.Fatalf("past the end: %v", err)
	}
	if _, err := s.Message([]byte("CCCCCCCCCCCCCCCC"), 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown partition: %v", err)
	}
	// A reopened store reads the same.
	s2 := mustOpen(t, s.Dir(), Options{SegmentBytes: 300})
	checkMessages(t, s2, pidA, 1, 50)
}

// Inside a batch, reads see the batch's own writes; a discarded stage takes
// its writes back, new segments included; nothing reaches the files before
// Flush.
func TestBatchStagesAndReadsOwnWrites(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 200})
	appendAll(t, s, pidA, 1, 2)
	b := s.Begin()
	st := b.Stage()
	for seq := uint64(3); seq <= 4; seq++ {
		if err := b.Append(pidA, 1, seq, msg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := b.Message(pidA, 4); err != nil || m.TxnID != "txn-4" {
		t.Fatalf("own write: %v %v", m, err)
	}
	if m, err := b.Message(pidA, 1); err != nil || m.TxnID != "txn-1" {
		t.Fatalf("flushed write through the batch: %v %v", m, err)
	}
	st.Keep()
	st = b.Stage()
	for seq := uint64(5); seq <= 12; seq++ { // rolls at least once
		if err := b.Append(pidA, 1, seq, msg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	st.Discard()
	if _, err := b.Entry(pidA, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a discarded write is still there: %v", err)
	}
	if _, err := s.Message(pidA, 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unflushed write reached the files: %v", err)
	}
	if err := b.Append(pidA, 1, 5, msg(5)); err != nil {
		t.Fatalf("append after a discard: %v", err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, s, pidA, 1, 5)
	if _, err := s.Message(pidA, 6); !errors.Is(err, ErrNotFound) {
		t.Fatal("a discarded record was flushed")
	}
}

// After a crash the files may hold records of a batch the state file never
// committed: the first append of the next process trims them.
func TestTrimAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{SegmentBytes: 250})
	appendAll(t, s, pidA, 1, 10)  // committed: next seq 11
	appendAll(t, s, pidA, 11, 30) // flushed, then the process died before the commit
	s.Close()
	s2 := mustOpen(t, dir, Options{SegmentBytes: 250})
	b := s2.Begin()
	for seq := uint64(11); seq <= 12; seq++ {
		m := msg(seq)
		m.TxnID = fmt.Sprint("second-", seq)
		if err := b.Append(pidA, 1, seq, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, s2, pidA, 1, 10)
	if m, err := s2.Message(pidA, 12); err != nil || m.TxnID != "second-12" {
		t.Fatalf("the new record: %v %v", m, err)
	}
	if _, err := s2.Message(pidA, 13); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an uncommitted record survived the trim: %v", err)
	}
	// A wrong seq is refused: appends are contiguous.
	if err := s2.Begin().Append(pidA, 1, 20, msg(20)); err == nil {
		t.Fatal("a gap was accepted")
	}
}

func TestSnapshotRoundTripAndPinnedRemoval(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	appendAll(t, s, pidA, 1, 30)
	appendAll(t, s, pidB, 1, 5)
	fz, err := s.Freeze([]PartitionState{{pidA, 1, 31}, {pidB, 1, 4}}) // B: only 1..3 committed
	if err != nil {
		t.Fatal(err)
	}
	// Writes and a removal while the snapshot is taken.
	appendAll(t, s, pidA, 31, 40)
	b := s.Begin()
	b.RemovePartition(pidB)
	b.Done()
	if _, err := os.Stat(filepath.Join(s.Dir(), partKey(pidB))); err != nil {
		t.Fatal("a pinned partition was removed")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := fz.WriteTar(tw, "messages/"); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	fz.Release()
	if _, err := os.Stat(filepath.Join(s.Dir(), partKey(pidB))); !os.IsNotExist(err) {
		t.Fatalf("the removal did not run on release: %v", err)
	}
	dst := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	appendAll(t, dst, []byte("ZZZZZZZZZZZZZZZZ"), 1, 2) // replaced by the restore
	r, err := dst.BeginRestore()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if err := r.Add(h.Name[len("messages/"):], tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, dst, pidA, 1, 30)
	checkMessages(t, dst, pidB, 1, 3)
	if _, err := dst.Message(pidA, 31); !errors.Is(err, ErrNotFound) {
		t.Fatal("the restore holds a record written after the freeze")
	}
	if _, err := dst.Message(pidB, 4); !errors.Is(err, ErrNotFound) {
		t.Fatal("the restore holds an uncommitted record")
	}
	if _, err := dst.Message([]byte("ZZZZZZZZZZZZZZZZ"), 1); !errors.Is(err, ErrNotFound) {
		t.Fatal("the restore kept a file it replaced")
	}
	// The restored store takes appends where the snapshot ended.
	appendAll(t, dst, pidB, 4, 4)
	checkMessages(t, dst, pidB, 1, 4)
	if err := r.Add("../escape", bytes.NewReader(nil)); err == nil {
		t.Fatal("a name outside the store was accepted")
	}
}

func TestRemoveOrphansAndSync(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	appendAll(t, s, pidA, 1, 3)
	appendAll(t, s, pidB, 1, 3)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveOrphans(func(name string) bool { id, _ := PartitionID(name); return bytes.Equal(id, pidA) }); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, s, pidA, 1, 3)
	if _, err := os.Stat(filepath.Join(s.Dir(), partKey(pidB))); !os.IsNotExist(err) {
		t.Fatal("an orphan survived")
	}
}
