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

	// Dropping past the end keeps the active segment: appends go on.
	b = s.Begin()
	b.DropBefore(pidA, 1000)
	b.Done()
	if n := len(segmentFiles(t, s, pidA)); n != 2 {
		t.Fatalf("the active segment must stay: %d files", n)
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
