package store

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

var testBucket = Bucket("b")

func mustOpen(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), []Bucket{testBucket}, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// model is the reference: a map, walked in sorted key order.
type model map[string]string

func (m model) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func walkForward(c Cursor) []string {
	var out []string
	for k, v := c.First(); k != nil; k, v = c.Next() {
		out = append(out, string(k)+"="+string(v))
	}
	return out
}

func walkBackward(c Cursor) []string {
	var out []string
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		out = append(out, string(k)+"="+string(v))
	}
	return out
}

func (m model) forward() []string {
	var out []string
	for _, k := range m.keys() {
		out = append(out, k+"="+m[k])
	}
	return out
}

// TestTxMergedViewMatchesModel drives random puts, deletes, commits and
// discards, and checks after every step that Get, forward and backward walks
// and Seek agree with a plain map.
func TestTxMergedViewMatchesModel(t *testing.T) {
	db := mustOpen(t)
	rng := rand.New(rand.NewSource(1))
	committed := model{}
	key := func() string { return fmt.Sprintf("k%02d", rng.Intn(40)) }

	for round := 0; round < 60; round++ {
		err := db.Update(func(b *Batch) error {
			for cmd := 0; cmd < 5; cmd++ {
				tx := b.Begin()
				view := model{}
				for k, v := range committed {
					view[k] = v
				}
				for op := 0; op < 20; op++ {
					k := key()
					if rng.Intn(3) == 0 {
						tx.Delete(testBucket, []byte(k))
						delete(view, k)
					} else {
						v := fmt.Sprintf("v%d", rng.Intn(1000))
						tx.Put(testBucket, []byte(k), []byte(v))
						view[k] = v
					}
					checkView(t, tx, view, key())
				}
				if rng.Intn(4) == 0 {
					tx.Discard()
					continue
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				committed = view
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(r Reader) error {
			got := walkForward(r.Cursor(testBucket))
			if fmt.Sprint(got) != fmt.Sprint(committed.forward()) {
				return fmt.Errorf("round %d: file %v, want %v", round, got, committed.forward())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func checkView(t *testing.T, tx *Tx, view model, probe string) {
	t.Helper()
	got := walkForward(tx.Cursor(testBucket))
	want := view.forward()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("forward walk %v, want %v", got, want)
	}
	back := walkBackward(tx.Cursor(testBucket))
	for i, j := 0, len(back)-1; i < j; i, j = i+1, j-1 {
		back[i], back[j] = back[j], back[i]
	}
	if fmt.Sprint(back) != fmt.Sprint(want) {
		t.Fatalf("backward walk %v, want %v", back, want)
	}
	if v := tx.Get(testBucket, []byte(probe)); string(v) != view[probe] || (v == nil) != (view[probe] == "" && !has(view, probe)) {
		t.Fatalf("Get(%s) = %q, want %q", probe, v, view[probe])
	}
	// Seek lands on the first key >= probe.
	k, _ := tx.Cursor(testBucket).Seek([]byte(probe))
	var wantK string
	for _, mk := range view.keys() {
		if mk >= probe {
			wantK = mk
			break
		}
	}
	if string(k) != wantK {
		t.Fatalf("Seek(%s) = %q, want %q", probe, k, wantK)
	}
}

func has(m model, k string) bool { _, ok := m[k]; return ok }

func TestRestoreSwapsWholeState(t *testing.T) {
	src := mustOpen(t)
	dst := mustOpen(t)
	put := func(db *DB, k, v string) {
		if err := db.Update(func(b *Batch) error {
			tx := b.Begin()
			tx.Put(testBucket, []byte(k), []byte(v))
			return tx.Commit()
		}); err != nil {
			t.Fatal(err)
		}
	}
	put(src, "a", "1")
	put(dst, "b", "2")
	snap, err := src.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := dst.Restore(&buf, nil); err != nil {
		t.Fatal(err)
	}
	dst.View(func(r Reader) error {
		if got := walkForward(r.Cursor(testBucket)); fmt.Sprint(got) != "[a=1]" {
			t.Fatalf("after restore %v", got)
		}
		return nil
	})
	if err := dst.Restore(bytes.NewReader([]byte("not a bbolt file")), nil); err == nil {
		t.Fatal("restore of garbage succeeded")
	}
	dst.View(func(r Reader) error {
		if got := walkForward(r.Cursor(testBucket)); fmt.Sprint(got) != "[a=1]" {
			t.Fatalf("a failed restore changed the state: %v", got)
		}
		return nil
	})
}

// TestTornFileAfterAMachineCrashIsSetAsideUnopened: a file whose last
// session did not close cleanly, written in another boot of the machine,
// may be torn by a power loss. Open must move it aside without opening it
// (bbolt can panic on a torn page), start empty, and keep doing so across
// restarts in the same boot only until a session of its own begins.
func TestTornFileAfterAMachineCrashIsSetAsideUnopened(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	db, err := Open(path, []Bucket{testBucket}, Options{DeferSync: true, BootID: "boot-1"})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(b *Batch) error {
		tx := b.Begin()
		tx.Put(testBucket, []byte("k"), []byte("v"))
		return tx.Commit()
	})
	// A process crash (no Close) in boot 1: same boot, trusted, kept.
	db.bolt.Close()
	db2, err := Open(path, []Bucket{testBucket}, Options{DeferSync: true, BootID: "boot-1"})
	if err != nil || db2.SetAside() != "" {
		t.Fatalf("same boot: set aside %q, %v", db2.SetAside(), err)
	}
	db2.bolt.Close() // crash again
	// The machine crashes and the file is torn beyond repair.
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4096)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	db3, err := Open(path, []Bucket{testBucket}, Options{DeferSync: true, BootID: "boot-2"})
	if err != nil {
		t.Fatalf("a torn file must not stop Open: %v", err)
	}
	defer db3.Close()
	if db3.SetAside() == "" {
		t.Fatal("a file from an unclean session of another boot was trusted")
	}
	db3.View(func(r Reader) error {
		if k, _ := r.Cursor(testBucket).First(); k != nil {
			t.Fatal("the rebuilt store is not empty")
		}
		return nil
	})
	if b, _ := os.ReadFile(db3.SetAside()); !bytes.Equal(b, garbage) {
		t.Fatal("the set-aside file was not kept as it was")
	}
}
