package raftlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/queen-node/queen-node/command"
)

// entries are the log the tests move around: indexes from..to, each a
// command (as the node encodes it) naming its index.
func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: commandData(fmt.Sprintf("entry-%d", i))})
	}
	return out
}

// commandData is a log entry's bytes as the node writes them, its actor
// set to actor (to size it or name it).
func commandData(actor string) []byte {
	b, err := command.Encode(&command.Command{Actor: actor})
	if err != nil {
		panic(err)
	}
	return b
}

func openKind(t *testing.T, dir, kind string) *Stores {
	t.Helper()
	s, err := Open(Config{Dir: dir, BindAddr: "127.0.0.1:0", Log: kind, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatalf("open %s: %v", kind, err)
	}
	return s
}

// holds checks that the stores' log is exactly from..to with the data
// entries gave it, and that the stable store kept its term.
func holds(t *testing.T, s *Stores, from, to uint64) {
	t.Helper()
	if f, _ := s.Log.FirstIndex(); f != from {
		t.Fatalf("%s: first index %d, want %d", s.LogKind, f, from)
	}
	if l, _ := s.Log.LastIndex(); l != to {
		t.Fatalf("%s: last index %d, want %d", s.LogKind, l, to)
	}
	for _, want := range entries(from, to) {
		var got raft.Log
		if err := s.Log.GetLog(want.Index, &got); err != nil || !bytes.Equal(got.Data, want.Data) || got.Term != want.Term {
			t.Fatalf("%s: entry %d: %v %q", s.LogKind, want.Index, err, got.Data)
		}
	}
	if term, err := s.Stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("%s: the stable store's term: %d %v", s.LogKind, term, err)
	}
}

func boltOnly(t *testing.T, dir string) *raftboltdb.BoltStore {
	t.Helper()
	bs, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// A data dir of an earlier version (its log in raft.db) moves its log into
// raft-wal at start and back with --raft-log bolt; after each move one store
// holds the whole log and the stable store is untouched.
func TestTheLogMovesBetweenBoltAndTheWAL(t *testing.T) {
	dir := t.TempDir()
	bs := boltOnly(t, dir)
	if err := bs.StoreLogs(entries(5, 300)); err != nil {
		t.Fatal(err)
	}
	bs.SetUint64([]byte("CurrentTerm"), 3)
	bs.Close()

	s := openKind(t, dir, LogWAL)
	if s.LogKind != LogWAL {
		t.Fatalf("kind %s", s.LogKind)
	}
	holds(t, s, 5, 300)
	if last, _ := s.bolt.LastIndex(); last != 0 {
		t.Fatalf("raft.db still holds the log up to %d", last)
	}
	if err := s.Log.StoreLogs(entries(301, 310)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openKind(t, dir, LogWAL) // a plain restart moves nothing
	holds(t, s, 5, 310)
	s.Close()

	s = openKind(t, dir, LogBolt)
	holds(t, s, 5, 310)
	if _, err := os.Stat(walDir(dir)); !os.IsNotExist(err) {
		t.Fatalf("the WAL is still there after moving out: %v", err)
	}
	s.Close()
}

// A crash in the middle of a move leaves one whole copy, and the next start
// finishes the move from it: a staging WAL is thrown away (raft.db is
// whole), and raft.db entries beside a WAL are a copy the WAL overrides.
func TestAnInterruptedMoveFinishesFromTheWholeCopy(t *testing.T) {
	t.Run("into the WAL", func(t *testing.T) {
		dir := t.TempDir()
		bs := boltOnly(t, dir)
		bs.StoreLogs(entries(1, 50))
		bs.SetUint64([]byte("CurrentTerm"), 3)
		bs.Close()
		// A staging copy of half the log, as a crash mid-copy leaves it.
		staging := walDir(dir) + ".migrating"
		os.MkdirAll(staging, 0o755)
		os.WriteFile(filepath.Join(staging, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o644)
		s := openKind(t, dir, LogWAL)
		holds(t, s, 1, 50)
		s.Close()
		if _, err := os.Stat(staging); !os.IsNotExist(err) {
			t.Fatal("the staging copy is still there")
		}
	})
	t.Run("out of the WAL", func(t *testing.T) {
		dir := t.TempDir()
		bs := boltOnly(t, dir)
		bs.SetUint64([]byte("CurrentTerm"), 3)
		bs.Close()
		s := openKind(t, dir, LogWAL)
		s.Log.StoreLogs(entries(1, 40))
		s.Close()
		// raft.db holding a partial copy, the WAL still there: a move out
		// that a crash cut.
		bs = boltOnly(t, dir)
		bs.StoreLogs(entries(1, 7))
		bs.Close()
		s = openKind(t, dir, LogBolt)
		holds(t, s, 1, 40)
		s.Close()
		// Back into the WAL, then raft.db entries beside it (a move in whose
		// last step, dropping raft.db's copy, a crash cut) are dropped.
		s = openKind(t, dir, LogWAL)
		s.Close()
		bs = boltOnly(t, dir)
		bs.StoreLogs(entries(1, 9))
		bs.Close()
		s = openKind(t, dir, LogWAL)
		holds(t, s, 1, 40)
		if last, _ := s.bolt.LastIndex(); last != 0 {
			t.Fatalf("raft.db's leftovers up to %d are still there", last)
		}
		s.Close()
	})
	if _, err := ParseLog("rocks"); err == nil {
		t.Fatal("an unknown --raft-log was taken")
	}
}
