package msgstore

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// onlySegment returns the one segment's .log and .index of pid.
func onlySegment(t *testing.T, s *Store, pid []byte) (logPath, idxPath string) {
	t.Helper()
	dir := filepath.Join(s.Dir(), partKey(pid))
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	idxs, _ := filepath.Glob(filepath.Join(dir, "*"+indexExt))
	if len(logs) != 1 || len(idxs) != 1 {
		t.Fatalf("want one segment in %s, have %v %v", dir, logs, idxs)
	}
	return logs[0], idxs[0]
}

// flipBit flips one bit of the byte at off in path.
func flipBit(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, what string, err error, seq uint64) {
	t.Helper()
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Seq != seq {
		t.Fatalf("%s: %v, want a CorruptError of seq %d", what, err, seq)
	}
}

// A flipped bit in a record's payload is found by every read of the record
// and never served; the records around it still read.
func TestFlippedRecordBitIsNeverServed(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	appendAll(t, s, pidA, 1, 5)
	logPath, _ := onlySegment(t, s, pidA)
	e, err := s.Entry(pidA, 3)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	flipBit(t, logPath, int64(e.Offset+e.Length-2)) // inside seq 3's payload

	s = mustOpen(t, dir, Options{})
	var reported []error
	s.OnCorrupt(func(err error) { reported = append(reported, err) })
	_, err = s.Message(pidA, 3)
	wantCorrupt(t, "Message", err, 3)
	if len(reported) != 1 {
		t.Fatalf("OnCorrupt called %d times, want 1", len(reported))
	}
	ms, err := s.Messages(pidA, 1, 5)
	wantCorrupt(t, "Messages", err, 3)
	if len(ms) != 2 {
		t.Fatalf("Messages returned %d before the damaged one, want 2", len(ms))
	}
	b := s.Begin()
	if _, err := b.Message(pidA, 2); err != nil || b.Damaged() != nil {
		t.Fatalf("intact seq 2: %v, batch damaged %v", err, b.Damaged())
	}
	_, err = b.Message(pidA, 3)
	wantCorrupt(t, "Batch.Message", err, 3)
	wantCorrupt(t, "Batch.Damaged", b.Damaged(), 3)
	_, err = b.Heads(pidA, 1, 5)
	wantCorrupt(t, "Batch.Heads", err, 3)
	b.Done()
	checkMessages(t, s, pidA, 4, 5)
	checkMessages(t, s, pidA, 1, 2)
}

// A flipped bit in an index entry (here in its createdAt, which no length
// check would catch) fails the entry's own checksum.
func TestFlippedIndexBitIsFound(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	appendAll(t, s, pidA, 1, 5)
	_, idxPath := onlySegment(t, s, pidA)
	s.Close()
	flipBit(t, idxPath, 1*entrySize+10) // seq 2's createdAt

	s = mustOpen(t, dir, Options{})
	_, err := s.Entry(pidA, 2)
	wantCorrupt(t, "Entry", err, 2)
	_, err = s.Entries(pidA, 1, 5)
	wantCorrupt(t, "Entries", err, 2)
	err = s.EachEntry(pidA, 1, 6, func(uint64, Entry) bool { return true })
	wantCorrupt(t, "EachEntry", err, 2)
	_, err = s.Messages(pidA, 1, 5)
	wantCorrupt(t, "Messages", err, 2)
	checkMessages(t, s, pidA, 3, 5)
}

// legacyCopy turns dir's checksummed index files back into state format
// 3's (.idx, 24-byte entries), as an older queen-node left them.
func legacyCopy(t *testing.T, dir string) {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(dir, "*", "*"+indexExt))
	if len(idxs) == 0 {
		t.Fatal("no index files")
	}
	for _, p := range idxs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var old []byte
		for k := 0; k+entrySize <= len(b); k += entrySize {
			old = append(old, b[k:k+legacyEntrySize]...)
		}
		if err := os.WriteFile(strings.TrimSuffix(p, indexExt)+legacyIndexExt, old, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
	}
}

// A store of state format 3 is migrated when it opens: every record reads
// back, checked, and a bit flipped after the migration is found.
func TestLegacyIndexMigratesAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	appendAll(t, s, pidA, 1, 40)
	appendAll(t, s, pidB, 1, 3)
	s.Close()
	legacyCopy(t, dir)

	s = mustOpen(t, dir, Options{})
	if s.Migrated() != 2 {
		t.Fatalf("migrated %d index files, want 2", s.Migrated())
	}
	checkMessages(t, s, pidA, 1, 40)
	checkMessages(t, s, pidB, 1, 3)
	appendAll(t, s, pidA, 41, 42) // appends go on after the migrated entries
	checkMessages(t, s, pidA, 1, 42)
	if old, _ := filepath.Glob(filepath.Join(dir, "*", "*"+legacyIndexExt)); len(old) != 0 {
		t.Fatalf("legacy index files left: %v", old)
	}
	logPath, _ := onlySegment(t, s, pidB)
	e, _ := s.Entry(pidB, 2)
	s.Close()
	flipBit(t, logPath, int64(e.Offset+e.Length-1))
	s = mustOpen(t, dir, Options{})
	_, err := s.Message(pidB, 2)
	wantCorrupt(t, "Message after migration", err, 2)
}

// A migration interrupted after a new index was renamed into place, before
// its legacy file went, finishes by removing the legacy file only; a
// legacy index longer than its log (a torn tail) keeps the whole records.
func TestLegacyMigrationResumes(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	appendAll(t, s, pidA, 1, 4)
	logPath, idxPath := onlySegment(t, s, pidA)
	s.Close()
	kept, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	legacyCopy(t, dir)
	legacy := strings.TrimSuffix(idxPath, indexExt) + legacyIndexExt
	old, _ := os.ReadFile(legacy)
	var torn [legacyEntrySize]byte
	binary.BigEndian.PutUint32(torn[0:], uint32(fileSize(t, logPath)))
	binary.BigEndian.PutUint32(torn[4:], 50) // a record the log never got
	if err := os.WriteFile(legacy, append(old, torn[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	checkMessages(t, s, pidA, 1, 4)
	if _, err := s.Entry(pidA, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("torn legacy entry: %v, want ErrNotFound", err)
	}
	s.Close()

	// Crash after the rename: both files are there, the new one complete.
	if err := os.WriteFile(legacy, []byte("not an index"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	if s.Migrated() != 0 {
		t.Fatalf("rewrote %d index files, want 0 (the new one was in place)", s.Migrated())
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("legacy file not removed: %v", err)
	}
	if now, _ := os.ReadFile(idxPath); string(now) != string(kept) {
		t.Fatal("the index in place changed")
	}
	checkMessages(t, s, pidA, 1, 4)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// A snapshot of state format 3 (legacy index files) restores into
// checksummed files.
func TestLegacySnapshotRestoresChecksummed(t *testing.T) {
	src := t.TempDir()
	s := mustOpen(t, src, Options{})
	appendAll(t, s, pidA, 1, 6)
	s.Close()
	legacyCopy(t, src)

	dst := mustOpen(t, t.TempDir(), Options{})
	r, err := dst.BeginRestore()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(src, "*", "*"))
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(src, p)
		if err := r.Add(filepath.ToSlash(rel), f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, dst, pidA, 1, 6)
	if old, _ := filepath.Glob(filepath.Join(dst.Dir(), "*", "*"+legacyIndexExt)); len(old) != 0 {
		t.Fatalf("legacy index files restored as they were: %v", old)
	}
}

// A log cut short under records its index still lists is damage, not a
// miss: reads say so, and the first append after a restart, which trims the
// partition back to what the state committed, refuses to build on an index
// that ends before the committed records.
func TestFilesCutShortAreDamage(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{})
	appendAll(t, s, pidA, 1, 5)
	logPath, idxPath := onlySegment(t, s, pidA)
	e, _ := s.Entry(pidA, 5)
	s.Close()
	if err := os.Truncate(logPath, int64(e.Offset)+2); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	_, err := s.Message(pidA, 5)
	wantCorrupt(t, "a record cut off", err, 5)
	checkMessages(t, s, pidA, 1, 4)
	s.Close()

	if err := os.Truncate(idxPath, 3*entrySize); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{})
	b := s.Begin()
	err = b.Append(pidA, 1, 6, msg(6)) // the state committed 1..5
	wantCorrupt(t, "an index cut off", err, 5)
	wantCorrupt(t, "its batch", b.Damaged(), 5)
}
