package store

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"
)

// With CommitEvery, every batch is visible to a reader the moment Update
// returns, though the file commits once per several batches: random puts
// and deletes over two buckets, a reader after every batch walking both
// ways, seeking and getting, against a plain map; and the file itself
// catches up at each commit and at Flush.
func TestBatchesKeptOpenAreReadAtOnce(t *testing.T) {
	other := Bucket("o")
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), []Bucket{testBucket, other},
		Options{NoSync: true, CommitEvery: 7, CommitAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewSource(7))
	want := map[string]model{string(testBucket): {}, string(other): {}}
	key := func() string { return fmt.Sprintf("k%02d", rng.Intn(50)) }
	commits := 0
	for round := 0; round < 100; round++ {
		err := db.Update(func(b *Batch) error {
			for cmd := 0; cmd < 3; cmd++ {
				tx := b.Begin()
				for op := 0; op < 8; op++ {
					bk, k := []Bucket{testBucket, other}[rng.Intn(2)], key()
					if rng.Intn(3) == 0 {
						tx.Delete(bk, []byte(k))
						delete(want[string(bk)], k)
					} else {
						v := fmt.Sprintf("v%d.%d", round, rng.Intn(1000))
						tx.Put(bk, []byte(k), []byte(v))
						want[string(bk)][k] = v
					}
				}
				if err := tx.Commit(); err != nil {
					return err
				}
			}
			return b.Put(other, []byte("meta"), []byte(fmt.Sprint(round)))
		})
		if err != nil {
			t.Fatal(err)
		}
		want[string(other)]["meta"] = fmt.Sprint(round)
		if db.Pending() == 0 {
			commits++
		}
		if db.Pending() >= 7 {
			t.Fatalf("round %d: %d batches pending, CommitEvery is 7", round, db.Pending())
		}
		if err := db.View(func(r Reader) error {
			for name, m := range want {
				b := Bucket(name)
				if got := walkForward(r.Cursor(b)); fmt.Sprint(got) != fmt.Sprint(m.forward()) {
					return fmt.Errorf("round %d, bucket %s forward:\n%v\nwant\n%v", round, name, got, m.forward())
				}
				back := walkBackward(r.Cursor(b))
				fw := m.forward()
				for i, j := 0, len(fw)-1; i < j; i, j = i+1, j-1 {
					fw[i], fw[j] = fw[j], fw[i]
				}
				if fmt.Sprint(back) != fmt.Sprint(fw) {
					return fmt.Errorf("round %d, bucket %s backward: %v", round, name, back)
				}
				for range 10 {
					k := key()
					if got, ok := r.Get(b, []byte(k)), m[k]; (got == nil) != (ok == "") || string(got) != ok {
						return fmt.Errorf("round %d: get %s/%s = %q, want %q", round, name, k, got, ok)
					}
					sk, _ := r.Cursor(b).Seek([]byte(k))
					var wk string
					for _, mk := range m.keys() {
						if mk >= k {
							wk = mk
							break
						}
					}
					if string(sk) != wk {
						return fmt.Errorf("round %d: seek %s/%s = %q, want %q", round, name, k, sk, wk)
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if commits < 10 || commits > 20 {
		t.Fatalf("%d commits of 100 batches with CommitEvery 7", commits)
	}
	// The file alone (no layers) holds everything after a Flush.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(db.layers) != 0 || db.Pending() != 0 {
		t.Fatalf("%d layers and %d batches pending after Flush", len(db.layers), db.Pending())
	}
	db.View(func(r Reader) error {
		if _, isOverlay := r.(overlayReader); isOverlay {
			t.Fatal("a reader after Flush still reads layers")
		}
		if got := walkForward(r.Cursor(testBucket)); fmt.Sprint(got) != fmt.Sprint(want[string(testBucket)].forward()) {
			t.Fatalf("the file after Flush: %v", got)
		}
		return nil
	})
}

// A batch that fails with others uncommitted stops the store: it cannot
// roll back to before it, and every later Update says why.
func TestAFailedBatchStopsAStoreWithBatchesOpen(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "s.db"), []Bucket{testBucket}, Options{NoSync: true, CommitEvery: 4, CommitAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Update(func(b *Batch) error { return b.Put(testBucket, []byte("a"), []byte("1")) })
	if err := db.Update(func(b *Batch) error { return fmt.Errorf("disk on fire") }); err == nil {
		t.Fatal("the failing batch succeeded")
	}
	if err := db.Update(func(b *Batch) error { return nil }); err == nil {
		t.Fatal("a store whose open batches were lost takes more")
	}
}

// BenchmarkCursorOverLayers walks a bucket whose 32 keys every one of the
// 31 batches kept open rewrote (a queue's partition records under a
// steady push): what a reader's scan of the partitions costs between two
// commits of the state file.
func BenchmarkCursorOverLayers(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "s.db"), []Bucket{testBucket},
		Options{NoSync: true, CommitEvery: 32, CommitAfter: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for round := 0; round < 31; round++ {
		if err := db.Update(func(bt *Batch) error {
			tx := bt.Begin()
			for k := 0; k < 32; k++ {
				tx.Put(testBucket, []byte(fmt.Sprintf("p%02d", k)), []byte(fmt.Sprint(round)))
			}
			return tx.Commit()
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := db.View(func(r Reader) error {
			if n := len(walkForward(r.Cursor(testBucket))); n != 32 {
				return fmt.Errorf("walked %d keys, want 32", n)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
