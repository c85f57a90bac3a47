package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names a flat bucket of the state file.
type Bucket []byte

// Errors returned by the store.
var (
	// ErrClosed is returned by any call after Close.
	ErrClosed = errors.New("store: closed")
)

// Options configure Open. The zero value is a durable store.
type Options struct {
	// NoSync skips fsync on commit. Only tests that throw the file away use it.
	NoSync bool
	// DeferSync skips fsync on commit too, for a caller that can rebuild
	// every commit since the last Sync from elsewhere (the FSM from the Raft
	// log). A process crash loses nothing (the page cache survives it); a
	// machine crash may tear the file, so Open then reports it untrusted:
	// see Trusted.
	DeferSync bool
	// BootID overrides the kernel's boot id (tests simulate a reboot).
	BootID string
	// InitialMmapSize sizes the first mapping; a larger one avoids remaps,
	// which wait for every open read transaction. 0 means 1 GiB.
	InitialMmapSize int
	// CommitEvery > 1 commits the file once per that many Update calls
	// (or CommitAfter, whichever comes first) instead of once per call;
	// readers see every call's writes meanwhile (overlay.go). Only for a
	// caller that can rebuild the uncommitted batches from elsewhere after
	// a crash (the FSM from the Raft log), and that calls Flush before it
	// relies on the file (a snapshot).
	CommitEvery int
	// CommitAfter bounds how long batches stay uncommitted; 0 = 50ms.
	CommitAfter time.Duration
}

// DB is the state file. Reads run concurrently with one writer; Restore swaps
// the file under an exclusive lock.
type DB struct {
	mu       sync.RWMutex // shared by View/Update, exclusive for Restore and Close
	wmu      sync.Mutex   // the writer's: Update, Flush (CommitEvery > 1)
	layersMu sync.Mutex   // the layers and the begin of a reader's view, together
	layers   []layer      // batches applied, not committed (oldest first)
	pend     pending      // the open write transaction (CommitEvery > 1)
	failed   error        // a batch failed with others uncommitted: no more writes
	bolt     *bolt.DB
	path     string
	opts     Options
	buckets  []Bucket
	setAside string // where an untrusted file was moved at Open ("" = none)
	// sealedAtOpen: records of a file without checksums given theirs when
	// it opened (checksum.go)
	sealedAtOpen int

	pinsMu  sync.Mutex
	pinsEnd chan struct{} // closed when a restore is about to wait for pinned views
}

// SealedAtOpen is how many records had no checksum yet when the file
// opened (a state file of format 4 or before), all of which have one now.
func (db *DB) SealedAtOpen() int { return db.sealedAtOpen }

// Open opens (creating if needed) the state file at path and makes sure every
// bucket exists.
func Open(path string, buckets []Bucket, opts Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if opts.CommitAfter == 0 {
		opts.CommitAfter = 50 * time.Millisecond
	}
	db := &DB{path: path, opts: opts, buckets: buckets}
	if opts.DeferSync {
		// Decide trust from the session record alone, and move an untrusted
		// file aside before anything opens it: bbolt may panic on a torn
		// page (even in its own goroutines), and a file that crashes every
		// start is worse than one rebuilt from the log.
		trusted, err := db.previousSessionTrusted()
		if err != nil {
			return nil, err
		}
		if !trusted {
			if db.setAside, err = Discard(path); err != nil {
				return nil, err
			}
		}
		// Only now does this session begin (recorded as not yet clean).
		if err := db.writeSession(session{BootID: db.bootID(), Clean: false}); err != nil {
			return nil, err
		}
	}
	if err := db.open(); err != nil {
		return nil, err
	}
	return db, nil
}

func (db *DB) open() error {
	mmap := db.opts.InitialMmapSize
	if mmap == 0 {
		mmap = 1 << 30
	}
	b, err := bolt.Open(db.path, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoSync:          db.opts.NoSync || db.opts.DeferSync,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: mmap,
	})
	if err != nil {
		return fmt.Errorf("store: open %s: %w", db.path, err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range db.buckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		// a file of state format 4 or before: every record gets its checksum
		db.sealedAtOpen, err = addChecksums(tx)
		return err
	})
	if err != nil {
		b.Close()
		return fmt.Errorf("store: create buckets: %w", err)
	}
	db.bolt = b
	return nil
}

// Path is the file's location.
func (db *DB) Path() string { return db.path }

// Close syncs and closes the file, and records a clean end of session.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.bolt == nil {
		return nil
	}
	db.wmu.Lock()
	err := db.flush()
	db.wmu.Unlock()
	if serr := db.bolt.Sync(); err == nil {
		err = serr
	}
	if cerr := db.bolt.Close(); err == nil {
		err = cerr
	}
	db.bolt = nil
	if err == nil && db.opts.DeferSync {
		err = db.endSession()
	}
	return err
}

// Sync makes every write durable, the batches Update kept open included.
func (db *DB) Sync() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.bolt == nil {
		return ErrClosed
	}
	db.wmu.Lock()
	err := db.flush()
	db.wmu.Unlock()
	if err != nil {
		return err
	}
	return db.bolt.Sync()
}

// SetAside names where Open moved a file it could not trust, or "". Only a
// DeferSync store does that: when the previous session did not close cleanly
// and the machine has rebooted since (a power loss may have dropped or torn
// unsynced pages). The store then starts empty, and the caller rebuilds the
// state from its own durable source.
func (db *DB) SetAside() string { return db.setAside }

// View runs fn in a read-only transaction: a consistent view as of the last
// batch Update applied (committed to the file or not yet).
// A record that fails its checksum (checksum.go) ends fn with a
// *CorruptError.
func (db *DB) View(fn func(r Reader) error) (err error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.bolt == nil {
		return ErrClosed
	}
	r, end, err := db.view()
	if err != nil {
		return err
	}
	defer end()
	defer catchCorrupt(&err)
	return fn(r)
}

// Pin opens a consistent view as of the last batch Update applied, like
// View, that lasts until release is called (which the caller must do;
// Close and Restore wait for it, so a long reader watches PinsEnd). Writes
// continue meanwhile.
func (db *DB) Pin() (r Reader, release func(), err error) {
	db.mu.RLock()
	if db.bolt == nil {
		db.mu.RUnlock()
		return nil, nil, ErrClosed
	}
	r, end, err := db.view()
	if err != nil {
		db.mu.RUnlock()
		return nil, nil, err
	}
	var once sync.Once
	return r, func() { once.Do(func() { end(); db.mu.RUnlock() }) }, nil
}

// PinsEnd is closed when a restore is about to replace the state: a
// pinned view (Pin) should be released at once, since the restore and
// every reader after it wait for it.
func (db *DB) PinsEnd() <-chan struct{} {
	db.pinsMu.Lock()
	defer db.pinsMu.Unlock()
	if db.pinsEnd == nil {
		db.pinsEnd = make(chan struct{})
	}
	return db.pinsEnd
}

func (db *DB) endPins() {
	db.pinsMu.Lock()
	defer db.pinsMu.Unlock()
	if db.pinsEnd != nil {
		close(db.pinsEnd)
		db.pinsEnd = nil
	}
}

// Update runs fn in the single write transaction and commits it (with fsync
// unless NoSync), or, with CommitEvery > 1, once enough batches have passed.
// fn builds one Tx per command with Begin.
func (db *DB) Update(fn func(b *Batch) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.bolt == nil {
		return ErrClosed
	}
	fn = checkedUpdate(fn)
	if db.opts.CommitEvery <= 1 {
		return db.bolt.Update(func(tx *bolt.Tx) error { return fn(&Batch{tx: tx}) })
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.failed != nil {
		return db.failed
	}
	return db.update(fn)
}

// checkedUpdate is fn ending with a *CorruptError where a read inside it
// meets a record that fails its checksum.
func checkedUpdate(fn func(b *Batch) error) func(b *Batch) error {
	return func(b *Batch) (err error) {
		defer catchCorrupt(&err)
		return fn(b)
	}
}

// Snapshot is a consistent copy of the file being written out.
type Snapshot struct {
	db *DB
	tx *bolt.Tx
}

// BeginSnapshot opens a read transaction that pins the current state (the
// batches Update kept open are committed first); the caller must call
// Release. Writes continue meanwhile.
func (db *DB) BeginSnapshot() (*Snapshot, error) {
	db.mu.RLock()
	if db.bolt == nil {
		db.mu.RUnlock()
		return nil, ErrClosed
	}
	db.wmu.Lock()
	err := db.flush()
	db.wmu.Unlock()
	if err != nil {
		db.mu.RUnlock()
		return nil, err
	}
	tx, err := db.bolt.Begin(false)
	if err != nil {
		db.mu.RUnlock()
		return nil, err
	}
	return &Snapshot{db: db, tx: tx}, nil
}

// WriteTo streams the pinned state as a bbolt file image.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) { return s.tx.WriteTo(w) }

// Size is the length of the image WriteTo writes.
func (s *Snapshot) Size() int64 { return s.tx.Size() }

// Reader reads the pinned state.
func (s *Snapshot) Reader() Reader { return readTx{tx: s.tx} }

// Release ends the snapshot.
func (s *Snapshot) Release() {
	if s.tx != nil {
		s.tx.Rollback()
		s.tx = nil
		s.db.mu.RUnlock()
	}
}

// Restore replaces the state with the bbolt image read from r: PrepareRestore
// and Commit.
func (db *DB) Restore(r io.Reader, check func(Reader) error) error {
	p, err := db.PrepareRestore(r, check)
	if err != nil {
		return err
	}
	return p.Commit(nil)
}

// PendingRestore is a checked image beside the file, waiting to replace it.
type PendingRestore struct {
	db  *DB
	tmp string
}

// PrepareRestore writes the bbolt image read from r beside the file, syncs
// it and checks it (it opens, and check, when not nil, accepts what it
// holds). The current state is untouched until Commit.
func (db *DB) PrepareRestore(r io.Reader, check func(Reader) error) (*PendingRestore, error) {
	tmp := db.path + ".restore"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: restore: %w", err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store: restore: copy: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("store: restore: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("store: restore: %w", err)
	}
	if err := Probe(tmp, check); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("store: restore: %w", err)
	}
	return &PendingRestore{db: db, tmp: tmp}, nil
}

// Probe opens the state image at path read-only and runs check on it: is
// it a state file, and does check accept what it holds.
func Probe(path string, check func(Reader) error) error {
	probe, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("image does not open: %w", err)
	}
	defer probe.Close()
	if check == nil {
		return nil
	}
	return probe.View(func(tx *bolt.Tx) (err error) {
		defer catchCorrupt(&err)
		return check(readTx{tx: tx, plain: !hasChecksums(tx)})
	})
}

// Abort drops a prepared image.
func (p *PendingRestore) Abort() { os.Remove(p.tmp) }

// Commit swaps the image in under the exclusive lock, so that readers see
// the old state or the new one. before, when not nil, runs under the same
// lock just before the swap (what else the state is made of, swapped with
// it); its error stops the swap.
func (p *PendingRestore) Commit(before func() error) error {
	db := p.db
	db.endPins()
	db.mu.Lock()
	defer db.mu.Unlock()
	if before != nil {
		if err := before(); err != nil {
			os.Remove(p.tmp)
			return err
		}
	}
	if db.bolt != nil {
		// What Update kept open belongs to the state being replaced.
		db.wmu.Lock()
		if db.pend.tx != nil {
			_ = db.pend.tx.Rollback()
		}
		db.pend, db.failed = pending{}, nil
		db.layersMu.Lock()
		db.layers = nil
		db.layersMu.Unlock()
		db.wmu.Unlock()
		if err := db.bolt.Close(); err != nil {
			return fmt.Errorf("store: restore: close: %w", err)
		}
		db.bolt = nil
	}
	if err := os.Rename(p.tmp, db.path); err != nil {
		return fmt.Errorf("store: restore: rename: %w", err)
	}
	if err := syncDir(filepath.Dir(db.path)); err != nil {
		return err
	}
	return db.open()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: sync dir: %w", err)
	}
	return nil
}

// Size is the file's current size in bytes.
func (db *DB) Size() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.bolt == nil {
		return 0
	}
	var n int64
	_ = db.bolt.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// Digest writes every key and value of the buckets, in order, to w (the
// state hash's part that lives in this file).
func Digest(w io.Writer, r Reader, buckets []Bucket) {
	for _, b := range buckets {
		c := r.Cursor(b)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			fmt.Fprintf(w, "%s|%x|%x\n", b, k, v)
		}
	}
}
