package store

import (
	"bytes"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// Reader is what both read transactions and command transactions offer.
// Slices it returns are valid until the transaction ends and must not be
// modified.
type Reader interface {
	Get(b Bucket, key []byte) []byte
	Cursor(b Bucket) Cursor
}

// Cursor walks a bucket in key order. Every method returns a nil key past
// either end.
type Cursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
}

// readTx reads a bbolt transaction's records, checked (plain: an image
// without checksums, checksum.go).
type readTx struct {
	tx    *bolt.Tx
	plain bool
}

func (r readTx) Get(b Bucket, key []byte) []byte { return bucketOf(r.tx, b, r.plain).Get(key) }
func (r readTx) Cursor(b Bucket) Cursor          { return bucketOf(r.tx, b, r.plain).Cursor() }

// Batch is the write transaction of one batch of log entries. Its writes
// go into the state file's write transaction and, when the file commits
// less often than every batch, into layer too, which readers see until the
// file commits (overlay.go).
type Batch struct {
	tx    *bolt.Tx
	layer layer  // nil: the batch commits on its own
	scope *Scope // whose buckets Put, Reader and Begin use (In); nil = the default tenant's
}

// Begin starts a command's transaction on top of everything the batch
// committed so far.
func (b *Batch) Begin() *Tx {
	return &Tx{base: b.tx, layer: b.layer, scope: b.scope}
}

// Reader reads the batch as committed so far.
func (b *Batch) Reader() Reader { return b.scope.Reader(readTx{tx: b.tx}) }

// Put writes straight into the batch (bookkeeping outside any command).
func (b *Batch) Put(bucket Bucket, key, value []byte) error {
	bucket = b.scope.Of(bucket)
	bk, err := writableBucketOf(b.tx, bucket)
	if err != nil {
		return err
	}
	if err := bk.Put(key, value); err != nil {
		return err
	}
	b.layer.note(bucket, key, value)
	return nil
}

// Tx is one command's view: writes are staged in memory and reach the batch
// only on Commit. Reads see the staged writes merged over the batch.
//
// Put and Delete take ownership of the key and value slices.
type Tx struct {
	base   *bolt.Tx
	layer  layer  // the batch's, when it has one
	scope  *Scope // whose buckets it reads and writes; nil = the default tenant's
	staged map[string]*stagedBucket
}

type stagedBucket struct {
	name   Bucket
	writes map[string][]byte // nil value = delete
	keys   []string          // sorted keys of writes; rebuilt when dirty
	dirty  bool
}

func (t *Tx) bucket(b Bucket, create bool) *stagedBucket {
	if t.staged == nil {
		if !create {
			return nil
		}
		t.staged = make(map[string]*stagedBucket)
	}
	sb := t.staged[string(b)]
	if sb == nil && create {
		sb = &stagedBucket{name: b, writes: make(map[string][]byte)}
		t.staged[string(b)] = sb
	}
	return sb
}

// Get returns the value of key, staged writes first.
func (t *Tx) Get(b Bucket, key []byte) []byte {
	b = t.scope.Of(b)
	if sb := t.bucket(b, false); sb != nil {
		if v, ok := sb.writes[string(key)]; ok {
			return v
		}
	}
	return bucketOf(t.base, b, false).Get(key)
}

// Put stages key = value. A nil value is stored as an empty one.
func (t *Tx) Put(b Bucket, key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	sb := t.bucket(t.scope.Of(b), true)
	if _, ok := sb.writes[string(key)]; !ok {
		sb.dirty = true
	}
	sb.writes[string(key)] = value
}

// Delete stages the removal of key.
func (t *Tx) Delete(b Bucket, key []byte) {
	sb := t.bucket(t.scope.Of(b), true)
	if _, ok := sb.writes[string(key)]; !ok {
		sb.dirty = true
	}
	sb.writes[string(key)] = nil
}

// Staged reports whether the command has written anything.
func (t *Tx) Staged() bool {
	for _, sb := range t.staged {
		if len(sb.writes) > 0 {
			return true
		}
	}
	return false
}

// Discard drops every staged write.
func (t *Tx) Discard() { t.staged = nil }

// Commit writes the staged writes into the batch in key order.
func (t *Tx) Commit() error {
	names := make([]string, 0, len(t.staged))
	for n := range t.staged {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sb := t.staged[n]
		bk, err := writableBucketOf(t.base, sb.name)
		if err != nil {
			return fmt.Errorf("store: commit %s: %w", sb.name, err)
		}
		for _, k := range sb.sortedKeys() {
			v, key := sb.writes[k], []byte(k)
			if v == nil {
				err = bk.Delete(key)
			} else {
				err = bk.Put(key, v)
			}
			if err != nil {
				return fmt.Errorf("store: commit %s: %w", sb.name, err)
			}
			t.layer.note(sb.name, key, v)
		}
	}
	t.staged = nil
	return nil
}

func (sb *stagedBucket) sortedKeys() []string {
	if sb.dirty || sb.keys == nil {
		sb.keys = sb.keys[:0]
		for k := range sb.writes {
			sb.keys = append(sb.keys, k)
		}
		sort.Strings(sb.keys)
		sb.dirty = false
	}
	return sb.keys
}

// Cursor walks the bucket with the staged writes merged in. With nothing
// staged in the bucket it is bbolt's own cursor.
func (t *Tx) Cursor(b Bucket) Cursor {
	b = t.scope.Of(b)
	base := bucketOf(t.base, b, false).Cursor()
	sb := t.bucket(b, false)
	if sb == nil || len(sb.writes) == 0 {
		return base
	}
	return &mergedCursor{base: base, sb: sb}
}

// mergedCursor positions itself by seeking: after each move it remembers the
// current key and finds its neighbour in both sources. That is a little
// slower than stepping, and only used where a command reads a bucket it
// has already written, or a reader a bucket the state file has not
// committed yet (base is then itself a merge, layer by layer).
type mergedCursor struct {
	base Cursor
	sb   *stagedBucket
	cur  []byte
}

// at returns the smallest visible key >= k (forward) from both sources.
func (c *mergedCursor) seekForward(k []byte) ([]byte, []byte) {
	keys := c.sb.sortedKeys()
	bk, bv := c.base.Seek(k)
	i := sort.SearchStrings(keys, string(k))
	for {
		// Skip base keys overridden by staged entries.
		var sk string
		haveS := i < len(keys)
		if haveS {
			sk = keys[i]
		}
		switch {
		case bk == nil && !haveS:
			c.cur = nil
			return nil, nil
		case haveS && (bk == nil || sk <= string(bk)):
			if bk != nil && sk == string(bk) {
				bk, bv = c.base.Next()
			}
			v := c.sb.writes[sk]
			i++
			if v == nil {
				continue // staged delete
			}
			c.cur = []byte(sk)
			return c.cur, v
		default:
			c.cur = bk
			return bk, bv
		}
	}
}

// seekBackward returns the largest visible key <= k, or < k when strict.
func (c *mergedCursor) seekBackward(k []byte, strict bool) ([]byte, []byte) {
	keys := c.sb.sortedKeys()
	// Base: largest key <= k (or < k).
	var bk, bv []byte
	if k == nil {
		bk, bv = c.base.Last()
	} else {
		bk, bv = c.base.Seek(k)
		if bk == nil {
			bk, bv = c.base.Last()
		} else if bytes.Compare(bk, k) > 0 || (strict && bytes.Equal(bk, k)) {
			bk, bv = c.base.Prev()
		}
	}
	// Staged: index of largest key <= k (or < k).
	var i int
	if k == nil {
		i = len(keys) - 1
	} else {
		i = sort.SearchStrings(keys, string(k)) // first >= k
		if i < len(keys) && keys[i] == string(k) && !strict {
			// keys[i] == k is allowed
		} else {
			i--
		}
	}
	for {
		haveS := i >= 0
		var sk string
		if haveS {
			sk = keys[i]
		}
		switch {
		case bk == nil && !haveS:
			c.cur = nil
			return nil, nil
		case haveS && (bk == nil || sk >= string(bk)):
			if bk != nil && sk == string(bk) {
				bk, bv = c.base.Prev()
			}
			v := c.sb.writes[sk]
			i--
			if v == nil {
				continue
			}
			c.cur = []byte(sk)
			return c.cur, v
		default:
			c.cur = bk
			return bk, bv
		}
	}
}

func (c *mergedCursor) First() ([]byte, []byte)        { return c.seekForward([]byte{}) }
func (c *mergedCursor) Last() ([]byte, []byte)         { return c.seekBackward(nil, false) }
func (c *mergedCursor) Seek(k []byte) ([]byte, []byte) { return c.seekForward(k) }

func (c *mergedCursor) Next() ([]byte, []byte) {
	if c.cur == nil {
		return nil, nil
	}
	succ := append(append([]byte{}, c.cur...), 0)
	return c.seekForward(succ)
}

func (c *mergedCursor) Prev() ([]byte, []byte) {
	if c.cur == nil {
		return nil, nil
	}
	return c.seekBackward(c.cur, true)
}
