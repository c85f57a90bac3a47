package raftlog

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/queen-node/queen-node/command"
)

func TestByteCacheStaysWithinBudgetAndServesMisses(t *testing.T) {
	bs, err := raftboltdb.NewBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	c, err := newByteCache(bs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 50; i++ {
		if err := c.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: commandData(strings.Repeat("a", 90))}}); err != nil {
			t.Fatal(err)
		}
		if c.size > 1000 {
			t.Fatalf("cache holds %d bytes over a 1000 budget", c.size)
		}
	}
	if len(c.logs) != 10 || c.first != 41 {
		t.Fatalf("cache holds %d entries from %d, want the newest 10", len(c.logs), c.first)
	}
	var l raft.Log
	if err := c.GetLog(5, &l); err != nil || l.Index != 5 {
		t.Fatalf("a miss must fall through to the store: %v %v", l.Index, err)
	}
	// A new leader overwriting the tail: the cache restarts, nothing stale.
	if err := c.StoreLogs([]*raft.Log{{Index: 45, Term: 2, Data: commandData("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(45, &l); err != nil || l.Term != 2 {
		t.Fatalf("overwritten entry: term %d, %v", l.Term, err)
	}
	if _, ok := c.logs[46]; ok {
		t.Fatal("entries after an overwrite must leave the cache")
	}
	if err := c.DeleteRange(1, 45); err != nil || len(c.logs) != 0 {
		t.Fatalf("DeleteRange must clear the cache: %d left, %v", len(c.logs), err)
	}
}

// After a head truncation nothing below the log's new first index is
// served, though raft-wal keeps the entries of a segment it has not
// dropped whole: a leader must send its snapshot, not compacted entries.
func TestNothingBelowTheFirstIndexIsServed(t *testing.T) {
	dir := t.TempDir()
	s := openKind(t, dir, LogWAL)
	if err := s.Log.StoreLogs(entries(1, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Log.DeleteRange(1, 60); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.Log.GetLog(60, &l); err != raft.ErrLogNotFound {
		t.Fatalf("entry 60 after truncating to 61: %v", err)
	}
	if err := s.Log.GetLog(61, &l); err != nil || l.Index != 61 {
		t.Fatalf("entry 61: %v", err)
	}
	s.Close()
	s = openKind(t, dir, LogWAL) // and after a restart
	defer s.Close()
	if err := s.Log.GetLog(60, &l); err != raft.ErrLogNotFound {
		t.Fatalf("entry 60 after a restart: %v", err)
	}
}

// Entries stored past the end of the log (after a snapshot restore on a
// leader) replace it: raft-wal takes no gap.
func TestAGapAfterARestoreEmptiesTheLog(t *testing.T) {
	for _, kind := range []string{LogWAL, LogBolt} {
		s := openKind(t, t.TempDir(), kind)
		if err := s.Log.StoreLogs(entries(1, 3)); err != nil {
			t.Fatal(err)
		}
		if err := s.Log.StoreLogs(entries(56, 60)); err != nil {
			t.Fatalf("%s: entries past a gap: %v", kind, err)
		}
		if f, _ := s.Log.FirstIndex(); f != 56 {
			t.Fatalf("%s: first index %d after the gap, want 56", kind, f)
		}
		var l raft.Log
		if err := s.Log.GetLog(2, &l); err != raft.ErrLogNotFound {
			t.Fatalf("%s: an entry before the gap: %v", kind, err)
		}
		s.Close()
	}
}

// A command entry whose bytes changed on disk is neither sent nor applied:
// GetLog answers it as missing (a leader then sends its snapshot) and says
// so; Raft's own entries, which carry no checksum, pass.
func TestADamagedEntryIsNotServed(t *testing.T) {
	bs, err := raftboltdb.NewBoltStore(filepath.Join(t.TempDir(), "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	good := commandData("payments")
	bad := append([]byte(nil), good...)
	bad[3] ^= 0x04
	if err := bs.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: good}, {Index: 2, Term: 1, Data: bad},
		{Index: 3, Term: 1, Type: raft.LogConfiguration, Data: []byte("raft's own")}}); err != nil {
		t.Fatal(err)
	}
	c, err := newByteCache(bs, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var found []error
	c.onCorrupt = func(err error) { found = append(found, err) }
	var l raft.Log
	if err := c.GetLog(1, &l); err != nil || string(l.Data) != string(good) {
		t.Fatalf("intact entry: %v", err)
	}
	if err := c.GetLog(2, &l); err != raft.ErrLogNotFound || l.Data != nil {
		t.Fatalf("damaged entry: %v, data %q; want ErrLogNotFound and nothing", err, l.Data)
	}
	if len(found) != 1 || !errors.Is(found[0], command.ErrCorruptEntry) || !strings.Contains(found[0].Error(), "entry 2") {
		t.Fatalf("reported %v, want one ErrCorruptEntry naming entry 2", found)
	}
	if err := c.GetLog(3, &l); err != nil {
		t.Fatalf("raft's own entry: %v", err)
	}
}

func TestCacheShareSplitsOneNodeBudget(t *testing.T) {
	for _, c := range []struct{ total, groups, want int }{
		{0, 1, DefaultCacheBytes},
		{0, 3, DefaultCacheBytes / 3},
		{0, 0, DefaultCacheBytes},
		{12 << 20, 4, 3 << 20},
	} {
		if got := CacheShare(c.total, c.groups); got != c.want {
			t.Errorf("CacheShare(%d, %d) = %d, want %d", c.total, c.groups, got, c.want)
		}
	}
}
