package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Per-record checksums (state format 5). bbolt checks its pages' structure,
// never their content: a flipped bit in a value reads back flipped. So
// every value this package writes ends with the CRC-32C of its bucket, its
// key and itself (4 bytes, little-endian), checked on every read; a record
// that fails is a *CorruptError, never the bytes. The CRC covers the key and
// the bucket, so a record found under another key (a flipped key bit, a
// misdirected write) fails too.
//
// A file carries the marker record (markerBucket/markerKey, written plain)
// once every value in it has a checksum: Open adds them to a file without
// it (one write transaction: all or nothing), and reads of an image without
// it (Probe of an older snapshot or backup) are unchecked.

var (
	markerBucket = []byte("_store")
	markerKey    = []byte("record_crc32c")
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// ErrCorrupt is what every *CorruptError is (errors.Is).
var ErrCorrupt = errors.New("store: a record of the state file fails its checksum")

// CorruptError is a record whose checksum fails: the file is damaged on
// this node.
type CorruptError struct {
	Bucket Bucket
	Key    []byte
	Why    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store: record %x of bucket %s of the state file %s: the file is damaged on this node", e.Key, e.Bucket, e.Why)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Damaged reports whether err says the state file is damaged: a record
// failed its checksum, or bbolt found its meta pages invalid.
func Damaged(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch)
}

func recordCRC(b Bucket, key, value []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	c = crc32.Update(c, castagnoli, []byte{0})
	c = crc32.Update(c, castagnoli, key)
	c = crc32.Update(c, castagnoli, []byte{0})
	return crc32.Update(c, castagnoli, value)
}

// sealed is value with its checksum appended (a new slice).
func sealed(b Bucket, key, value []byte) []byte {
	out := append(make([]byte, 0, len(value)+4), value...)
	return binary.LittleEndian.AppendUint32(out, recordCRC(b, key, value))
}

// opened is the value of a stored record, checked; a record that fails
// panics with a *CorruptError, which the readers' entry points (View,
// Update, Pin's users, Probe) turn into an error (catchCorrupt): Get and
// the cursors have no error to return, and a damaged value must never
// reach a caller as if it were one.
func opened(b Bucket, key, stored []byte) []byte {
	if len(stored) < 4 {
		panic(&CorruptError{Bucket: b, Key: append([]byte(nil), key...), Why: fmt.Sprintf("is %d bytes, shorter than its checksum", len(stored))})
	}
	value, sum := stored[:len(stored)-4], binary.LittleEndian.Uint32(stored[len(stored)-4:])
	if recordCRC(b, key, value) != sum {
		panic(&CorruptError{Bucket: b, Key: append([]byte(nil), key...), Why: "fails its CRC-32C"})
	}
	return value
}

// catchCorrupt, deferred, turns a *CorruptError panic into *err; any other
// panic goes on.
func catchCorrupt(err *error) {
	if r := recover(); r != nil {
		if ce, ok := r.(*CorruptError); ok {
			*err = ce
			return
		}
		panic(r)
	}
}

// Checked runs fn and returns the *CorruptError a read inside it met, as an
// error, instead of letting it panic on: for a reader used outside View and
// Update (a Pin).
func Checked(fn func() error) (err error) {
	defer catchCorrupt(&err)
	return fn()
}

// checkedBucket reads and writes one bucket's records with their checksums
// (plain: an image without the marker, read unchecked).
type checkedBucket struct {
	b     *bolt.Bucket
	name  Bucket
	plain bool
}

func bucketOf(tx *bolt.Tx, name Bucket, plain bool) checkedBucket {
	return checkedBucket{b: tx.Bucket(name), name: name, plain: plain}
}

func (c checkedBucket) Get(key []byte) []byte {
	if c.b == nil {
		return nil // a tenant's bucket before its first write
	}
	v := c.b.Get(key)
	if v == nil || c.plain {
		return v
	}
	return opened(c.name, key, v)
}

func (c checkedBucket) Put(key, value []byte) error { return c.b.Put(key, sealed(c.name, key, value)) }

func (c checkedBucket) Delete(key []byte) error { return c.b.Delete(key) }

func (c checkedBucket) Cursor() Cursor {
	if c.b == nil {
		return emptyCursor{}
	}
	if c.plain {
		return c.b.Cursor()
	}
	return checkedCursor{c: c.b.Cursor(), name: c.name}
}

type checkedCursor struct {
	c    *bolt.Cursor
	name Bucket
}

func (c checkedCursor) check(k, v []byte) ([]byte, []byte) {
	if k == nil {
		return nil, nil
	}
	return k, opened(c.name, k, v)
}

func (c checkedCursor) First() ([]byte, []byte)        { return c.check(c.c.First()) }
func (c checkedCursor) Last() ([]byte, []byte)         { return c.check(c.c.Last()) }
func (c checkedCursor) Seek(k []byte) ([]byte, []byte) { return c.check(c.c.Seek(k)) }
func (c checkedCursor) Next() ([]byte, []byte)         { return c.check(c.c.Next()) }
func (c checkedCursor) Prev() ([]byte, []byte)         { return c.check(c.c.Prev()) }

// hasChecksums reports whether the file tx reads carries the marker.
func hasChecksums(tx *bolt.Tx) bool {
	b := tx.Bucket(markerBucket)
	return b != nil && b.Get(markerKey) != nil
}

// addChecksums gives every record of a file without the marker its
// checksum, and writes the marker, in tx (all or nothing). It returns how
// many records it sealed.
func addChecksums(tx *bolt.Tx) (int, error) {
	if hasChecksums(tx) {
		return 0, nil
	}
	n := 0
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if string(name) == string(markerBucket) {
			return nil
		}
		type kv struct{ k, v []byte }
		var all []kv // rewritten after the walk: a cursor's bucket must not change under it
		if err := b.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("store: bucket %s holds a nested bucket %x, which this store never writes", name, k)
			}
			all = append(all, kv{append([]byte(nil), k...), sealed(Bucket(name), k, v)})
			return nil
		}); err != nil {
			return err
		}
		for _, r := range all {
			if err := b.Put(r.k, r.v); err != nil {
				return err
			}
		}
		n += len(all)
		return nil
	})
	if err != nil {
		return n, err
	}
	mb, err := tx.CreateBucketIfNotExists(markerBucket)
	if err != nil {
		return n, err
	}
	return n, mb.Put(markerKey, []byte{1})
}
