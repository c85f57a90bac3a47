package store

import (
	"path/filepath"
	"testing"
)

// Two tenants write the same key of the same bucket; each reads its own,
// through a command's Tx, the batch's reader, the layers kept open between
// commits and a committed view, and a shared bucket stays shared.
func TestScopesKeepTenantsApart(t *testing.T) {
	shared := Bucket("meta")
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), []Bucket{testBucket, shared},
		Options{NoSync: true, CommitEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	acme := NewScope("tenant/acme/", []Bucket{testBucket})
	var tenants = []*Scope{nil, acme}
	if err := db.Update(func(b *Batch) error {
		for i, s := range tenants {
			tx := b.In(s).Begin()
			if got := tx.Get(testBucket, []byte("k")); got != nil {
				t.Errorf("tenant %d sees %q before writing", i, got)
			}
			if c := tx.Cursor(testBucket); c != nil {
				if k, _ := c.First(); k != nil {
					t.Errorf("tenant %d walks %q before writing", i, k)
				}
			}
			tx.Put(testBucket, []byte("k"), []byte{byte('0' + i)})
			tx.Put(shared, []byte("last"), []byte{byte('0' + i)})
			if err := tx.Commit(); err != nil {
				return err
			}
		}
		return b.In(acme).Put(testBucket, []byte("p"), []byte("acme"))
	}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if err := db.View(func(r Reader) error {
			if got := string(r.Get(testBucket, []byte("k"))); got != "0" {
				t.Errorf("%s: default reads %q, want 0", when, got)
			}
			if got := r.Get(testBucket, []byte("p")); got != nil {
				t.Errorf("%s: default reads acme's key p: %q", when, got)
			}
			ar := acme.Reader(r)
			if got := string(ar.Get(testBucket, []byte("k"))); got != "1" {
				t.Errorf("%s: acme reads %q, want 1", when, got)
			}
			if got := walkForward(ar.Cursor(testBucket)); len(got) != 2 || got[0] != "k=1" || got[1] != "p=acme" {
				t.Errorf("%s: acme walks %v", when, got)
			}
			if got := walkForward(r.Cursor(testBucket)); len(got) != 1 || got[0] != "k=0" {
				t.Errorf("%s: default walks %v", when, got)
			}
			for _, rd := range []Reader{r, ar} {
				if got := string(rd.Get(shared, []byte("last"))); got != "1" {
					t.Errorf("%s: the shared bucket reads %q, want 1", when, got)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check("in the layers")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("committed")
	if got := acme.Buckets(); len(got) != 1 || string(got[0]) != "tenant/acme/b" {
		t.Fatalf("acme's buckets %q", got)
	}
}
