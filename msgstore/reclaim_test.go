package msgstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func segmentFiles(t *testing.T, s *Store, pid []byte) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.Dir(), partKey(pid), "*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestDropBeforeRemovesWholeSegmentsOnly(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	appendAll(t, s, pidA, 1, 100)
	appendAll(t, s, pidB, 1, 10)
	before := len(segmentFiles(t, s, pidA))
	sizeBefore := s.Size()

	// A refused command's drop is taken back with the rest of its stage.
	b := s.Begin()
	st := b.Stage()
	b.DropBefore(pidA, 60)
	st.Discard()
	b.Done()
	if got := len(segmentFiles(t, s, pidA)); got != before {
		t.Fatalf("a discarded drop removed files: %d -> %d", before, got)
	}

	b = s.Begin()
	b.DropBefore(pidA, 60)
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	// Nothing goes before the state committed (Done).
	if got := len(segmentFiles(t, s, pidA)); got != before {
		t.Fatalf("files removed before Done: %d -> %d", before, got)
	}
	b.Done()
	after := len(segmentFiles(t, s, pidA))
	if after >= before || after%2 != 0 {
		t.Fatalf("segment files %d -> %d: want fewer, in .log/.idx pairs", before, after)
	}
	if s.Size() >= sizeBefore {
		t.Fatalf("size %d -> %d", sizeBefore, s.Size())
	}
	// Every seq from 60 on is still there; the first kept segment may hold
	// some below 60 (a segment goes only when all of it is below).
	checkMessages(t, s, pidA, 60, 100)
	if _, err := s.Message(pidA, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("seq 1 after the drop: %v", err)
	}
	checkMessages(t, s, pidB, 1, 10) // other partitions untouched

	// Dropping everything removes the active segment too; appends go on
	// in a new one at the partition's next seq.
	b = s.Begin()
	b.DropBefore(pidA, 101)
	b.Done()
	if n := len(segmentFiles(t, s, pidA)); n != 0 {
		t.Fatalf("every record was dropped, %d files stay", n)
	}
	appendAll(t, s, pidA, 101, 105)
	checkMessages(t, s, pidA, 101, 105)

	// A restart reads the same partition from what is on disk.
	s2 := mustOpen(t, s.Dir(), Options{SegmentBytes: 300})
	checkMessages(t, s2, pidA, 101, 105)
}

func TestDropBeforeWaitsForAPinnedSnapshot(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 300})
	appendAll(t, s, pidA, 1, 50)
	snap, err := s.Freeze([]PartitionState{{PID: pidA, FirstSeq: 1, NextSeq: 51}})
	if err != nil {
		t.Fatal(err)
	}
	files := segmentFiles(t, s, pidA)
	b := s.Begin()
	b.DropBefore(pidA, 40)
	b.Done()
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("a pinned file went before the snapshot was released: %v", err)
		}
	}
	snap.Release()
	if got := len(segmentFiles(t, s, pidA)); got >= len(files) {
		t.Fatalf("after release: %d files, had %d", got, len(files))
	}
}

// A drop that stops inside the active segment keeps it.
func TestDropBeforeKeepsTheSegmentOfTheFirstKeptSeq(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentBytes: 1 << 20})
	appendAll(t, s, pidA, 1, 20)
	b := s.Begin()
	b.DropBefore(pidA, 20)
	b.Done()
	if n := len(segmentFiles(t, s, pidA)); n != 2 {
		t.Fatalf("seq 20 is in the only segment: %d files", n)
	}
	checkMessages(t, s, pidA, 20, 20)
}

// AppendRolling starts a new segment once the active one's first record
// is the span older than the new one, and only then; the same records roll
// at the same seq after a restart (the first record's time is read back).
func TestAppendRollsByTime(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{SegmentBytes: 1 << 20})
	put := func(s *Store, seq uint64, us int64) {
		t.Helper()
		b := s.Begin()
		m := msg(seq)
		m.CreatedUs = us
		if err := b.AppendRolling(pidA, 1, seq, m, 10e6); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		b.Done()
	}
	for seq := uint64(1); seq <= 5; seq++ {
		put(s, seq, int64(seq)*1e6) // 1 s .. 5 s: one segment
	}
	if n := len(segmentFiles(t, s, pidA)); n != 2 {
		t.Fatalf("5 s of records in a 10 s span: %d files", n)
	}
	s2 := mustOpen(t, dir, Options{SegmentBytes: 1 << 20})
	put(s2, 6, 10.9e6) // 9.9 s after the first: same segment
	put(s2, 7, 11e6)   // 10 s after: a new one
	if n := len(segmentFiles(t, s2, pidA)); n != 4 {
		t.Fatalf("want two segments, %d files", n)
	}
	if ms, err := s2.Messages(pidA, 1, 7); err != nil || len(ms) != 7 || ms[6].CreatedUs != 11e6 {
		t.Fatalf("read back: %d messages, %v", len(ms), err)
	}
}

// Files below the committed FirstSeq that a crash left (the drop's removal
// never ran) go at open; what is at or above it stays.
func TestRemoveBelowAfterACrashedDrop(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{SegmentBytes: 300})
	appendAll(t, s, pidA, 1, 100)
	appendAll(t, s, pidB, 1, 10)
	s2 := mustOpen(t, dir, Options{SegmentBytes: 300})
	before := len(segmentFiles(t, s2, pidA))
	if err := s2.RemoveBelow([]PartitionState{{PID: pidA, FirstSeq: 60, NextSeq: 101}, {PID: pidB, FirstSeq: 11, NextSeq: 11}}); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFiles(t, s2, pidA)); got >= before || got == 0 {
		t.Fatalf("files %d -> %d", before, got)
	}
	checkMessages(t, s2, pidA, 60, 100)
	if n := len(segmentFiles(t, s2, pidB)); n != 0 {
		t.Fatalf("an emptied partition keeps %d files", n)
	}
	appendAll(t, s2, pidB, 11, 12) // appends go on at the next seq
}
