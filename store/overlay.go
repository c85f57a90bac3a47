package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Fewer, larger commits (Options.CommitEvery). A bbolt commit rewrites
// every B+tree page a batch dirtied and the meta page, whatever the batch
// wrote; the mission's small commands dirty the same few pages (the meta
// record, a partition, a cursor, a lease) batch after batch. So a store
// opened with CommitEvery N keeps one write transaction open across N
// batches (or CommitAfter, whichever comes first) and commits it once.
//
// Readers must see every batch the moment Update returns (linearizable
// reads, pops' readiness, the scope check): each batch's writes are also
// kept as an immutable layer, and a reader reads the last committed state
// with the layers committed since laid over it, newest on top. A commit
// drops the layers it wrote. A reader takes the committed view and the
// layer list under one lock that the flush takes only after its commit, so
// it sees every batch once or twice (a layer over a view that already has
// it says the same), never none.
//
// Recovery is unchanged: the state file holds the applied index with the
// data of the batches it committed, the Raft log the rest; the FSM flushes
// before a snapshot lets Raft truncate the log.

// layer is one batch's writes, by bucket; nil = none kept.
type layer map[string]*stagedBucket

func (l layer) note(b Bucket, key, value []byte) {
	if l == nil {
		return
	}
	sb := l[string(b)]
	if sb == nil {
		sb = &stagedBucket{name: b, writes: map[string][]byte{}}
		l[string(b)] = sb
	}
	if value == nil {
		sb.writes[string(key)] = nil
		return
	}
	sb.writes[string(key)] = value
}

// seal makes l readable by concurrent readers: every bucket's keys sorted
// once, nothing changed after.
func (l layer) seal() {
	for _, sb := range l {
		sb.dirty = true
		sb.sortedKeys()
	}
}

// overlayReader reads a committed view with the layers committed since.
type overlayReader struct {
	tx     *bolt.Tx
	layers []layer // oldest first
}

func (r overlayReader) Get(b Bucket, key []byte) []byte {
	for i := len(r.layers) - 1; i >= 0; i-- {
		if sb := r.layers[i][string(b)]; sb != nil {
			if v, ok := sb.writes[string(key)]; ok {
				return v // nil: deleted
			}
		}
	}
	return bucketOf(r.tx, b, false).Get(key)
}

// Cursor merges the layers that wrote b into one (newest wins) over the
// committed bucket. Stacking a merged cursor per layer instead made each
// step re-seek every layer below it, and a key written in every layer (a
// partition's record, batch after batch) cost O(layers²) seeks a step.
func (r overlayReader) Cursor(b Bucket) Cursor {
	c := bucketOf(r.tx, b, false).Cursor()
	var wrote []*stagedBucket
	for _, l := range r.layers {
		if sb := l[string(b)]; sb != nil && len(sb.writes) > 0 {
			wrote = append(wrote, sb)
		}
	}
	switch len(wrote) {
	case 0:
		return c
	case 1:
		return &mergedCursor{base: c, sb: wrote[0]}
	}
	merged := &stagedBucket{name: b, writes: map[string][]byte{}, dirty: true}
	for _, sb := range wrote { // oldest first: the newest write of a key wins
		for k, v := range sb.writes {
			merged.writes[k] = v
		}
	}
	return &mergedCursor{base: c, sb: merged}
}

// pending is the state file's open write transaction and what readers
// see of it.
type pending struct {
	tx      *bolt.Tx  // nil: none open
	batches int       // batches in tx
	since   time.Time // when tx began
}

// view is a reader's consistent view: the committed state and the layers
// since. The caller ends it.
func (db *DB) view() (Reader, func(), error) {
	db.layersMu.Lock()
	tx, err := db.bolt.Begin(false)
	ls := db.layers
	db.layersMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	end := func() { _ = tx.Rollback() }
	if len(ls) == 0 {
		return readTx{tx: tx}, end, nil
	}
	return overlayReader{tx: tx, layers: ls}, end, nil
}

// update runs fn in the open write transaction and commits it when
// CommitEvery batches or CommitAfter have passed. The caller holds wmu.
func (db *DB) update(fn func(b *Batch) error) error {
	if db.pend.tx == nil {
		tx, err := db.bolt.Begin(true)
		if err != nil {
			return err
		}
		db.pend = pending{tx: tx, since: time.Now()}
	}
	b := &Batch{tx: db.pend.tx, layer: layer{}}
	if err := fn(b); err != nil {
		// The open transaction holds batches readers have seen: it cannot be
		// rolled back to before this one. The store stops taking writes
		// (the FSM treats it as fatal and the node restarts from the log).
		_ = db.pend.tx.Rollback()
		db.pend = pending{}
		db.failed = fmt.Errorf("store: a batch failed with earlier ones uncommitted: %w", err)
		return err
	}
	db.pend.batches++
	b.layer.seal()
	db.layersMu.Lock()
	db.layers = append(db.layers[:len(db.layers):len(db.layers)], b.layer)
	db.layersMu.Unlock()
	if db.pend.batches >= db.opts.CommitEvery || time.Since(db.pend.since) >= db.opts.CommitAfter {
		return db.flush()
	}
	return nil
}

// flush commits the open write transaction, then drops the layers it
// holds. The caller holds wmu.
func (db *DB) flush() error {
	if db.pend.tx == nil {
		return nil
	}
	n := db.pend.batches
	err := db.pend.tx.Commit()
	db.pend = pending{}
	if err != nil {
		db.failed = fmt.Errorf("store: commit of %d batches: %w", n, err)
		return db.failed
	}
	db.layersMu.Lock()
	db.layers = append([]layer(nil), db.layers[min(n, len(db.layers)):]...)
	db.layersMu.Unlock()
	return nil
}

// Flush commits the batches Update kept open, so that the file holds every
// batch applied (a snapshot, a sync, a close need it).
func (db *DB) Flush() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.bolt == nil {
		return ErrClosed
	}
	return db.flush()
}

// Pending is how many applied batches the file has not committed yet.
func (db *DB) Pending() int {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	return db.pend.batches
}

// FlushStale commits the batches Update kept open when the oldest is
// CommitAfter old: an idle node's last batches reach the file too.
func (db *DB) FlushStale() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.bolt == nil || db.pend.tx == nil || time.Since(db.pend.since) < db.opts.CommitAfter {
		return nil
	}
	return db.flush()
}
