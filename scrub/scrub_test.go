package scrub

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/queen-node/queen-node/msgstore"
)

var pids = [][]byte{[]byte("AAAAAAAAAAAAAAAA"), []byte("BBBBBBBBBBBBBBBB")}

func msg(seq uint64) *msgstore.Message {
	return &msgstore.Message{ID: bytes.Repeat([]byte{byte(seq)}, 16), TxnID: fmt.Sprint("txn-", seq),
		CreatedUs: int64(seq), Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"%0100d"}`, seq, seq))}
}

func appendRange(t *testing.T, s *msgstore.Store, pid []byte, from, to uint64) {
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

func open(t *testing.T, dir string) (*msgstore.Store, *atomic.Int64) {
	t.Helper()
	s, err := msgstore.Open(dir, msgstore.Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var reported atomic.Int64
	s.OnCorrupt(func(error) { reported.Add(1) })
	return s, &reported
}

// flip flips one bit at off of the file matching pattern under dir that
// sorts first.
func flip(t *testing.T, dir, pattern string, off int64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(files) == 0 {
		t.Fatalf("no %s", pattern)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x20
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A pass checks every record of every segment once and finds a flipped
// bit in a record and one in an index entry, each reported as damage; an
// intact store has none.
func TestAPassFindsEveryDamagedRecord(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir)
	appendRange(t, s, pids[0], 1, 300) // several segments of 16 KiB
	appendRange(t, s, pids[1], 1, 40)
	sc := New(s, Options{Pacer: NewPacer(1 << 30)})
	checked, damaged, err := sc.Pass(context.Background())
	if err != nil || checked != 340 || damaged != 0 {
		t.Fatalf("intact: checked %d, damaged %d, %v; want 340, 0", checked, damaged, err)
	}
	s.Close()
	flip(t, dir, "4141*/*.log", 200)    // a record of partition A's first segment
	flip(t, dir, "4242*/*.index", 3*32) // seq 4's index entry of partition B
	s, reported := open(t, dir)
	sc = New(s, Options{Pacer: NewPacer(1 << 30)})
	checked, damaged, err = sc.Pass(context.Background())
	if err != nil || checked != 340 || damaged != 2 {
		t.Fatalf("damaged: checked %d, damaged %d, %v; want 340, 2", checked, damaged, err)
	}
	if reported.Load() < 2 {
		t.Fatalf("OnCorrupt saw %d findings, want at least 2", reported.Load())
	}
}

// A pass that runs while batches are appended and flushed, and retention
// drops segments, never calls intact data damaged.
func TestAPassBesideWritesFindsNothing(t *testing.T) {
	s, reported := open(t, t.TempDir())
	appendRange(t, s, pids[0], 1, 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := uint64(101); seq <= 1000; seq += 10 {
			appendRange(t, s, pids[0], seq, seq+9)
			if seq%200 == 1 {
				b := s.Begin()
				b.DropBefore(pids[0], seq-50)
				b.Flush()
				b.Done()
			}
		}
	}()
	sc := New(s, Options{Pacer: NewPacer(1 << 30)})
	for range 5 {
		if _, damaged, err := sc.Pass(context.Background()); err != nil || damaged != 0 {
			t.Fatalf("pass beside writes: damaged %d, %v", damaged, err)
		}
	}
	wg.Wait()
	if reported.Load() != 0 {
		t.Fatalf("OnCorrupt called %d times on intact data", reported.Load())
	}
}

// A pass ends when its context does, in the wait of its rate limit.
func TestAPassStopsWithItsContext(t *testing.T) {
	s, _ := open(t, t.TempDir())
	appendRange(t, s, pids[0], 1, 300)
	sc := New(s, Options{Pacer: NewPacer(1)}) // one byte a second: the first wait is long
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := sc.Pass(ctx); err == nil {
		t.Fatal("a pass with its context ended finished anyway")
	}
}
