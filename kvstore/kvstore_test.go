package kvstore

import (
	"path/filepath"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// kv applies ops through a real store, one command per call.
type kv struct {
	t     *testing.T
	db    *store.DB
	index uint64
}

func newKV(t *testing.T) *kv {
	db, err := store.Open(filepath.Join(t.TempDir(), "kv.db"), []store.Bucket{BucketEntries, BucketExpiry}, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &kv{t: t, db: db}
}

func (k *kv) do(now int64, op *command.KVOp) *command.KVResult {
	k.t.Helper()
	var res *command.KVResult
	k.index++
	if err := k.db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		res = Apply(tx, op, now, k.index)
		return tx.Commit()
	}); err != nil {
		k.t.Fatal(err)
	}
	return res
}

const sec = int64(1e6)

func TestPutGetVersionsAndNull(t *testing.T) {
	k := newKV(t)
	r := k.do(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "a", Value: []byte("null"), Forever: true})
	if !r.Applied || r.Version != 1 {
		t.Fatalf("put: %v", r)
	}
	g := k.do(1, &command.KVOp{Kind: command.KVOp_GET, Ns: "n", Key: "a"})
	if !g.Found || string(g.Value) != "null" || g.Version != 1 {
		t.Fatalf("get of a stored null: %v", g)
	}
	if g := k.do(1, &command.KVOp{Kind: command.KVOp_GET, Ns: "n", Key: "b"}); g.Found {
		t.Fatalf("absent key found: %v", g)
	}
	// cas by version.
	if r := k.do(2, &command.KVOp{Kind: command.KVOp_CAS, Ns: "n", Key: "a", Value: []byte("1"), HasExpect: true, Expect: 9, Forever: true}); r.Applied || r.Reason != command.KVResult_VERSION {
		t.Fatalf("cas with a wrong version: %v", r)
	}
	if r := k.do(2, &command.KVOp{Kind: command.KVOp_CAS, Ns: "n", Key: "a", Value: []byte("1"), HasExpect: true, Expect: 1, Forever: true}); !r.Applied || r.Version != k.index {
		t.Fatalf("cas: %v", r)
	}
	if r := k.do(2, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "zz", Value: []byte("1"), HasExpect: true, Expect: 5, Forever: true}); r.Applied || r.Reason != command.KVResult_ABSENT {
		t.Fatalf("expect N on an absent key: %v", r)
	}
}

func TestPutIfAbsentLoserSeesTheWinner(t *testing.T) {
	k := newKV(t)
	k.do(0, &command.KVOp{Kind: command.KVOp_PUT_IF_ABSENT, Ns: "n", Key: "m", Value: []byte(`"first"`), TtlSeconds: 10})
	r := k.do(1, &command.KVOp{Kind: command.KVOp_PUT_IF_ABSENT, Ns: "n", Key: "m", Value: []byte(`"second"`), TtlSeconds: 10})
	if r.Applied || r.Reason != command.KVResult_EXISTS || string(r.Value) != `"first"` || r.Version != 1 {
		t.Fatalf("loser: %v", r)
	}
}

func TestExpiryIsImmediateAndSweepCollects(t *testing.T) {
	k := newKV(t)
	k.do(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "t", Value: []byte("1"), TtlSeconds: 5})
	if g := k.do(5*sec-1, &command.KVOp{Kind: command.KVOp_GET, Ns: "n", Key: "t"}); !g.Found {
		t.Fatal("gone before its expiry")
	}
	if g := k.do(5*sec, &command.KVOp{Kind: command.KVOp_GET, Ns: "n", Key: "t"}); g.Found {
		t.Fatal("visible at its expiry")
	}
	// An expired key counts as absent for putIfAbsent.
	if r := k.do(6*sec, &command.KVOp{Kind: command.KVOp_PUT_IF_ABSENT, Ns: "n", Key: "t", Value: []byte("2"), TtlSeconds: 5}); !r.Applied {
		t.Fatalf("putIfAbsent over an expired key: %v", r)
	}
	k.do(6*sec, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "u", Value: []byte("1"), TtlSeconds: 1})
	var n int
	k.db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		n, _ = Sweep(tx, 8*sec, 100)
		return tx.Commit()
	})
	if n != 1 {
		t.Fatalf("swept %d, want 1 (u; t was rewritten with a new expiry)", n)
	}
	k.db.View(func(r store.Reader) error {
		if r.Get(BucketEntries, entryKey("n", "u")) != nil {
			t.Fatal("swept entry still stored")
		}
		if r.Get(BucketEntries, entryKey("n", "t")) == nil {
			t.Fatal("live entry swept")
		}
		return nil
	})
}

func TestIncrLimitsAndTypes(t *testing.T) {
	k := newKV(t)
	if r := k.do(0, &command.KVOp{Kind: command.KVOp_INCR, Ns: "n", Key: "c", Delta: 5, TtlSeconds: 10}); !r.Applied || string(r.Value) != "5" {
		t.Fatalf("incr create: %v", r)
	}
	if r := k.do(1, &command.KVOp{Kind: command.KVOp_INCR, Ns: "n", Key: "c", Delta: 5, HasMax: true, Max: 9, TtlSeconds: 10}); r.Applied || r.Reason != command.KVResult_LIMIT {
		t.Fatalf("incr past max: %v", r)
	}
	k.do(2, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "s", Value: []byte(`"x"`), Forever: true})
	if r := k.do(3, &command.KVOp{Kind: command.KVOp_INCR, Ns: "n", Key: "s", Delta: 1, Forever: true}); r.Applied || r.Reason != command.KVResult_TYPE {
		t.Fatalf("incr of a string: %v", r)
	}
}

func TestGetManyAndPrefix(t *testing.T) {
	k := newKV(t)
	for _, key := range []string{"a:1", "a:2", "a:3", "b:1"} {
		k.do(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: key, Value: []byte("1"), Forever: true})
	}
	m := k.do(1, &command.KVOp{Kind: command.KVOp_GET_MANY, Ns: "n", Keys: []string{"a:1", "zz", "b:1"}})
	if len(m.Rows) != 2 || len(m.Missing) != 1 || m.Missing[0] != "zz" {
		t.Fatalf("getMany: %v", m)
	}
	p := k.do(1, &command.KVOp{Kind: command.KVOp_GET_PREFIX, Ns: "n", Prefix: "a:", Limit: 2})
	if len(p.Rows) != 2 || !p.Truncated || p.NextAfter != "a:2" {
		t.Fatalf("prefix page 1: %v", p)
	}
	p = k.do(1, &command.KVOp{Kind: command.KVOp_GET_PREFIX, Ns: "n", Prefix: "a:", Limit: 2, After: "a:2"})
	if len(p.Rows) != 1 || p.Rows[0].Key != "a:3" || p.Truncated {
		t.Fatalf("prefix page 2: %v", p)
	}
	// Another namespace is separate.
	if g := k.do(1, &command.KVOp{Kind: command.KVOp_GET, Ns: "other", Key: "a:1"}); g.Found {
		t.Fatal("namespaces leak")
	}
}

func TestDeleteAndCheck(t *testing.T) {
	k := newKV(t)
	if r := k.do(0, &command.KVOp{Kind: command.KVOp_DELETE, Ns: "n", Key: "x"}); r.Applied || r.Reason != command.KVResult_ABSENT {
		t.Fatalf("delete absent: %v", r)
	}
	k.do(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: "n", Key: "x", Value: []byte("1"), TtlSeconds: 9})
	if r := k.do(1, &command.KVOp{Kind: command.KVOp_CHECK, Ns: "n", Key: "x", HasExpect: true, Expect: 2}); !r.Applied {
		t.Fatalf("check at the right version: %v", r)
	}
	if r := k.do(1, &command.KVOp{Kind: command.KVOp_CHECK, Ns: "n", Key: "x", HasExpect: true, Expect: 0}); r.Applied {
		t.Fatalf("check absent of a present key: %v", r)
	}
	if r := k.do(1, &command.KVOp{Kind: command.KVOp_DELETE, Ns: "n", Key: "x"}); !r.Applied {
		t.Fatalf("delete: %v", r)
	}
	k.db.View(func(r store.Reader) error {
		if c, _ := r.Cursor(BucketExpiry).First(); c != nil {
			t.Fatal("expiry index kept a deleted key")
		}
		return nil
	})
}
