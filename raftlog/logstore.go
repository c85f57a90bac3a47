package raftlog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
)

// Where the log lives (Config.Log). The stable store (term, vote) is
// raft.db (raft-boltdb) either way.
const (
	// LogWAL is hashicorp/raft-wal in Dir/wal: segment files, one fsync
	// per append, whole files dropped on truncation (Consul's WAL).
	LogWAL = "wal"
	// LogBolt is raft-boltdb's raft.db: a bbolt commit (two fsyncs) per
	// append.
	LogBolt = "bolt"
)

// DefaultSegmentBytes is the size of a raft-wal segment file (raft-wal's
// own default); each is preallocated.
const DefaultSegmentBytes = 64 << 20

// ParseLog checks a --raft-log value.
func ParseLog(s string) (string, error) {
	switch s {
	case "", LogWAL:
		return LogWAL, nil
	case LogBolt:
		return LogBolt, nil
	}
	return "", fmt.Errorf("raftlog: --raft-log %q: want %s or %s", s, LogWAL, LogBolt)
}

// walDir is where raft-wal keeps its segments and meta file. Its presence
// decides which store holds the log: a log is moved into the WAL by
// copying it into walDir+".migrating" and renaming that into place, and
// moved out by copying it into raft.db and only then removing walDir, so a
// crash at any point leaves one whole copy that the next start uses.
func walDir(dir string) string { return filepath.Join(dir, "wal") }

// openLog opens the log of kind in dir over the bolt store bs (which holds
// the stable store, and the log itself in bolt mode), moving an existing
// log from the other kind first. It returns the log and what closes it
// (nil when bs holds the log).
func openLog(dir, kind string, segmentBytes int, bs *raftboltdb.BoltStore, logger hclog.Logger) (raft.LogStore, func() error, error) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	open := func(path string) (*wal.WAL, error) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, fmt.Errorf("raftlog: %w", err)
		}
		w, err := wal.Open(path, wal.WithSegmentSize(segmentBytes), wal.WithLogger(logger.Named("wal")))
		if err != nil {
			return nil, fmt.Errorf("raftlog: open raft-wal in %s: %w", path, err)
		}
		return w, nil
	}
	final, staging := walDir(dir), walDir(dir)+".migrating"
	if err := os.RemoveAll(staging); err != nil { // a move into the WAL that a crash interrupted
		return nil, nil, fmt.Errorf("raftlog: %w", err)
	}
	_, err := os.Stat(final)
	walHolds := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("raftlog: %w", err)
	}
	boltLast, err := bs.LastIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("raftlog: raft.db: %w", err)
	}
	switch {
	case kind == LogWAL && !walHolds && boltLast > 0:
		// An earlier version's log, in raft.db: move it into the WAL.
		w, err := open(staging)
		if err != nil {
			return nil, nil, err
		}
		n, cerr := copyLog(w, bs)
		if cerr == nil {
			cerr = w.Close()
		} else {
			w.Close()
		}
		if cerr == nil {
			cerr = renameDir(staging, final)
		}
		if cerr != nil {
			return nil, nil, fmt.Errorf("raftlog: moving the log from raft.db into raft-wal: %w", cerr)
		}
		logger.Info("moved the Raft log from raft.db (raft-boltdb) into raft-wal", "entries", n, "dir", final)
		fallthrough
	case kind == LogWAL:
		w, err := open(final)
		if err != nil {
			return nil, nil, err
		}
		if err := dropBoltLog(bs, logger); err != nil { // what a finished move left behind
			w.Close()
			return nil, nil, err
		}
		return w, w.Close, nil
	case walHolds:
		// --raft-log bolt on a data dir whose log is in the WAL: move it
		// back. raft.db's own entries, if any, are a move that a crash
		// interrupted: the WAL is the whole copy.
		if err := dropBoltLog(bs, logger); err != nil {
			return nil, nil, err
		}
		w, err := open(final)
		if err != nil {
			return nil, nil, err
		}
		n, cerr := copyLog(bs, w)
		if err := w.Close(); cerr == nil {
			cerr = err
		}
		if cerr == nil {
			cerr = os.RemoveAll(final)
		}
		if cerr != nil {
			return nil, nil, fmt.Errorf("raftlog: moving the log from raft-wal into raft.db: %w", cerr)
		}
		logger.Info("moved the Raft log from raft-wal into raft.db (raft-boltdb), as --raft-log bolt asks", "entries", n)
	}
	return bs, nil, nil
}

// copyLog copies every entry of src into dst (empty), in batches of about
// 16 MiB, and returns how many it copied.
func copyLog(dst, src raft.LogStore) (uint64, error) {
	first, err := src.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := src.LastIndex()
	if err != nil || last == 0 {
		return 0, err
	}
	if err := migrate.CopyLogs(context.Background(), dst, src, 16<<20, nil); err != nil {
		return 0, err
	}
	if got, err := dst.LastIndex(); err != nil || got != last {
		return 0, fmt.Errorf("copied up to index %d of %d (%v)", got, last, err)
	}
	return last - first + 1, nil
}

// dropBoltLog deletes the log entries raft.db still holds.
func dropBoltLog(bs *raftboltdb.BoltStore, logger hclog.Logger) error {
	first, err := bs.FirstIndex()
	if err != nil {
		return fmt.Errorf("raftlog: raft.db: %w", err)
	}
	last, err := bs.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	if err := bs.DeleteRange(first, last); err != nil {
		return fmt.Errorf("raftlog: dropping raft.db's copy of the log: %w", err)
	}
	logger.Info("dropped raft.db's copy of the Raft log (the log is in raft-wal)", "entries", last-first+1)
	return nil
}

// renameDir renames from to to and makes the rename durable.
func renameDir(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
