package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var bRows = Bucket("rows")

func putRow(t *testing.T, db *DB, key, value string) {
	t.Helper()
	if err := db.Update(func(b *Batch) error {
		tx := b.Begin()
		tx.Put(bRows, []byte(key), []byte(value))
		return tx.Commit()
	}); err != nil {
		t.Fatal(err)
	}
}

// flipIn flips one bit in the middle of every copy of needle in the file.
func flipIn(t *testing.T, path, needle string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(b, []byte(needle))
	if n == 0 {
		t.Fatalf("%q is not in %s", needle, path)
	}
	for at := 0; ; {
		i := bytes.Index(b[at:], []byte(needle))
		if i < 0 {
			break
		}
		b[at+i+len(needle)/2] ^= 0x04
		at += i + len(needle)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A flipped bit in a stored value, or in its key, is found on the read
// that meets it, by Get and by cursors alike: the read is an error that
// says so (errors.Is ErrCorrupt), never the bytes; the other records read
// as written.
func TestAFlippedRecordIsAnErrorNeverItsBytes(t *testing.T) {
	for _, tc := range []struct{ name, flip string }{{"value", "the-value-to-flip"}, {"key", "the-key-to-flip"}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			db, err := Open(path, []Bucket{bRows}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			putRow(t, db, "the-key-to-flip", "the-value-to-flip")
			putRow(t, db, "intact", "as written")
			db.Close()
			flipIn(t, path, tc.flip)
			if db, err = Open(path, []Bucket{bRows}, Options{}); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got []byte
			if err := db.View(func(r Reader) error { got = r.Get(bRows, []byte("intact")); return nil }); err != nil || string(got) != "as written" {
				t.Fatalf("the intact record: %q %v", got, err)
			}
			err = db.View(func(r Reader) error {
				c := r.Cursor(bRows)
				for k, v := c.First(); k != nil; k, v = c.Next() {
					got = v
				}
				return nil
			})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || string(ce.Bucket) != "rows" {
				t.Fatalf("a cursor over the damaged record: %v (last value %q)", err, got)
			}
			if tc.name == "value" {
				err = db.View(func(r Reader) error { got = r.Get(bRows, []byte("the-key-to-flip")); return nil })
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Get of the damaged value: %q %v", got, err)
				}
			}
			err = db.Update(func(b *Batch) error {
				tx := b.Begin()
				tx.Get(bRows, []byte("the-key-to-flip"))
				c := tx.Cursor(bRows)
				for k, _ := c.First(); k != nil; k, _ = c.Next() {
				}
				return tx.Commit()
			})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a batch that read the damaged record: %v", err)
			}
		})
	}
}

// A file written before checksums (no marker) gets them when it opens, in
// one transaction, and reads back as it was; an image of it is read plain
// by Probe.
func TestAFileWithoutChecksumsGetsThemAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bRows)
		if err != nil {
			return err
		}
		for _, kv := range [][2]string{{"a", "1"}, {"b", ""}, {"c", "three"}} {
			if err := b.Put([]byte(kv[0]), []byte(kv[1])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	var seen []string
	if err := Probe(path, func(r Reader) error {
		seen = append(seen, string(r.Get(bRows, []byte("c"))))
		return nil
	}); err != nil || seen[0] != "three" {
		t.Fatalf("Probe of an image without checksums: %v %v", seen, err)
	}
	db, err := Open(path, []Bucket{bRows}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.SealedAtOpen() != 3 {
		t.Fatalf("sealed %d records at open, want 3", db.SealedAtOpen())
	}
	var all []string
	if err := db.View(func(r Reader) error {
		c := r.Cursor(bRows)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			all = append(all, string(k)+"="+string(v))
		}
		return nil
	}); err != nil || len(all) != 3 || all[0] != "a=1" || all[1] != "b=" || all[2] != "c=three" {
		t.Fatalf("after the migration: %v %v", all, err)
	}
	db.Close()
	if db, err = Open(path, []Bucket{bRows}, Options{}); err != nil || db.SealedAtOpen() != 0 {
		t.Fatalf("the second open sealed %d (%v)", db.SealedAtOpen(), err)
	}
	db.Close()
}
