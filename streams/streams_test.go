package streams

import (
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

func openDB(t *testing.T) *store.DB {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), Buckets, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func update(t *testing.T, db *store.DB, fn func(tx *store.Tx)) {
	t.Helper()
	if err := db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		fn(tx)
		return tx.Commit()
	}); err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, db *store.DB, fn func(r store.Reader)) {
	t.Helper()
	if err := db.View(func(r store.Reader) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
}

func id() []byte { u := uuid.New(); return u[:] }

func register(t *testing.T, db *store.DB, name, hash string, reset bool) *command.StreamRegisterResult {
	var res *command.StreamRegisterResult
	update(t, db, func(tx *store.Tx) {
		res = Register(tx, &command.StreamRegister{Name: name, SourceQueue: "src", ConfigHash: hash, ResetState: reset,
			QueryId: id(), StateId: id()}, 1)
	})
	return res
}

// Registration is idempotent by name; a new hash needs reset, which starts
// a new state generation (the query keeps its id); reset with the same hash
// keeps the state (Queen's rule).
func TestRegisterAndReset(t *testing.T) {
	db := openDB(t)
	first := register(t, db, "q", "h1", false)
	if !first.Fresh || first.DidReset || first.Mismatch {
		t.Fatalf("first: %+v", first)
	}
	pid := id()
	update(t, db, func(tx *store.Tx) {
		s := Open(tx, first.Query, pid, 0)
		s.Upsert("k", []byte(`{"acc":1}`), 2)
		s.Close()
	})
	if r := register(t, db, "q", "h1", true); r.Fresh || r.DidReset || string(r.Query.StateId) != string(first.Query.StateId) {
		t.Fatalf("same hash with reset: %+v", r)
	}
	if r := register(t, db, "q", "h2", false); !r.Mismatch || r.Query.ConfigHash != "h1" {
		t.Fatalf("new hash without reset: %+v", r)
	}
	r := register(t, db, "q", "h2", true)
	if !r.DidReset || string(r.Query.Id) != string(first.Query.Id) || string(r.Query.StateId) == string(first.Query.StateId) {
		t.Fatalf("reset: %+v", r)
	}
	view(t, db, func(rd store.Reader) {
		if rows := Rows(rd, r.Query, &command.StreamStateGet{PartitionId: pid}); len(rows) != 0 {
			t.Fatalf("rows after reset: %v", rows)
		}
		if !SweepDue(rd) {
			t.Fatal("the old generation is not waiting for the sweep")
		}
	})
}

// The rows a query may hold per partition are bounded; a delete frees
// room; state/get filters by keys, prefix and a ripe windowEnd.
func TestRowsLimitAndFilters(t *testing.T) {
	db := openDB(t)
	q := register(t, db, "q", "h", false).Query
	pid := id()
	update(t, db, func(tx *store.Tx) {
		s := Open(tx, q, pid, 3)
		for _, k := range []string{"w\x1f1", "w\x1f2", "x"} {
			if !s.Upsert(k, []byte(`{"windowEnd":`+map[string]string{"w\x1f1": "1000", "w\x1f2": "5000", "x": `"late"`}[k]+`}`), 2) {
				t.Fatalf("upsert %q refused", k)
			}
		}
		if s.Upsert("y", []byte(`{}`), 2) {
			t.Fatal("a fourth key passed a limit of 3")
		}
		if !s.Upsert("x", []byte(`{"windowEnd":"late"}`), 3) {
			t.Fatal("rewriting a held key was refused")
		}
		if s.Remove("nope") || !s.Remove("x") || !s.Upsert("y", []byte(`{}`), 4) {
			t.Fatal("a delete did not make room")
		}
		s.Close()
	})
	view(t, db, func(rd store.Reader) {
		get := func(in *command.StreamStateGet) (keys []string) {
			in.PartitionId = pid
			for _, r := range Rows(rd, q, in) {
				keys = append(keys, r.Key)
			}
			return keys
		}
		if k := get(&command.StreamStateGet{}); len(k) != 3 || k[0] != "w\x1f1" || k[2] != "y" {
			t.Fatalf("all: %q", k)
		}
		if k := get(&command.StreamStateGet{Keys: []string{"y", "y", "gone"}}); len(k) != 1 || k[0] != "y" {
			t.Fatalf("by keys: %q", k)
		}
		if k := get(&command.StreamStateGet{KeyPrefix: "w\x1f"}); len(k) != 2 {
			t.Fatalf("by prefix: %q", k)
		}
		if k := get(&command.StreamStateGet{HasRipe: true, RipeAtOrBefore: 1000}); len(k) != 1 || k[0] != "w\x1f1" {
			t.Fatalf("ripe: %q (rows without a numeric windowEnd are left out)", k)
		}
	})
}

// A deleted query's rows go in sweep steps of at most limit rows, and its
// bookkeeping with the last step.
func TestSweepRemovesBuriedRowsInSteps(t *testing.T) {
	db := openDB(t)
	q := register(t, db, "q", "h", false).Query
	for range 2 {
		pid := id()
		update(t, db, func(tx *store.Tx) {
			s := Open(tx, q, pid, 0)
			for i := range 5 {
				s.Upsert(string(rune('a'+i)), []byte(`1`), 1)
			}
			s.Close()
		})
	}
	update(t, db, func(tx *store.Tx) {
		if !Delete(tx, "q") || Delete(tx, "q") {
			t.Fatal("delete")
		}
	})
	steps := 0
	for {
		var n int
		var more bool
		update(t, db, func(tx *store.Tx) { n, more = Sweep(tx, 4) })
		steps++
		if n > 4 {
			t.Fatalf("a step removed %d rows, limit 4", n)
		}
		if !more {
			break
		}
	}
	if steps != 3 {
		t.Fatalf("%d steps for 10 rows at 4 a step, want 3", steps)
	}
	view(t, db, func(rd store.Reader) {
		for _, b := range Buckets {
			if k, _ := rd.Cursor(b).First(); k != nil {
				t.Fatalf("bucket %s still holds %q", b, k)
			}
		}
	})
}
