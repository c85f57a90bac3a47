package fsm

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/locks"
	"github.com/queen-node/queen-node/store"
)

func (h *harness) locks(ops ...*command.LockOp) *command.LocksResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Locks{Locks: &command.Locks{Ops: ops}}}).(*command.LocksResult)
}

func lockAcquire(name, owner string, limit uint32, ttl int64) *command.LockOp {
	return &command.LockOp{Kind: command.LockOp_ACQUIRE, Name: name, Owner: owner, Limit: limit, TtlSeconds: ttl}
}

// dataHash digests every bucket but the meta record (the applied index):
// what a refused command must leave as it was.
func dataHash(t *testing.T, f *FSM) string {
	t.Helper()
	return stateHashOf(t, f, Buckets[1:])
}

// A worker that lost its lock can never commit: its transaction, guarded
// by the permit it held, rolls back whole with kv_precondition once the
// permit expired and another worker took it, and writes nothing.
func TestAGuardedTransactionOfALostLockCommitsNothing(t *testing.T) {
	h := newHarness(t)
	w1 := h.locks(lockAcquire("report", "w1", 1, 2)).Results[0]
	if !w1.Ok || w1.Token != h.index {
		t.Fatalf("acquire: %v", w1)
	}
	guarded := func(guard *command.KVOp, txn string) *command.TxnResult {
		return h.txn(&command.Transaction{
			Ops: []*command.TxnOp{pushOp(item("reports", "", txn))},
			Kv: []*command.KVOp{guard,
				{Kind: command.KVOp_INCR, Ns: "jobs", Key: "runs", Delta: 1, Forever: true}},
		})
	}
	// While it holds the lock the worker commits.
	if r := guarded(locks.Guard("report", w1.Slot, w1.Token), "r1"); !r.Success {
		t.Fatalf("guarded commit while the lock is held: %v", r)
	}
	h.advance(2 * time.Second)
	w2 := h.locks(lockAcquire("report", "w2", 1, 2)).Results[0]
	if !w2.Ok || w2.Token <= w1.Token {
		t.Fatalf("second worker's acquire after the expiry: %v", w2)
	}
	before := dataHash(t, h.f)
	r := guarded(locks.Guard("report", w1.Slot, w1.Token), "r2")
	if r.Success || r.Reason != command.Reason_KV_PRECONDITION || r.FailedKv.GetReason() != command.KVResult_VERSION {
		t.Fatalf("the first worker's guarded commit after it lost the lock: %v", r)
	}
	eq(t, "state after the refused commit", dataHash(t, h.f), before)
	// The holder's own guard commits.
	if r := guarded(locks.Guard("report", w2.Slot, w2.Token), "r3"); !r.Success {
		t.Fatalf("the new holder's guarded commit: %v", r)
	}
	h.read(func(rd *Reader) {
		if v := rd.KV(&command.KVOp{Kind: command.KVOp_GET, Ns: "jobs", Key: "runs"}, h.now); string(v.Value) != "2" {
			t.Fatalf("runs = %s, want 2 (the lost worker's commit must not count)", v.Value)
		}
	})
}

// A permit is an ordinary KV row: the KV routes read it, and the KV switch
// stops locks as it stops KV.
func TestLocksAreKVRowsAndFollowTheKVSwitch(t *testing.T) {
	h := newHarness(t)
	a := h.locks(lockAcquire("gpu", "w1", 4, 30)).Results[0]
	h.read(func(rd *Reader) {
		v := rd.KV(&command.KVOp{Kind: command.KVOp_GET, Ns: locks.Namespace, Key: "gpu#0"}, h.now)
		if !v.Found || v.Version != a.Token || string(v.Value) != `{"owner":"w1"}` || v.ExpiresUs != h.now+30e6 {
			t.Fatalf("the permit's row: %v", v)
		}
	})
	off := false
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{KvEnabled: &off}}})
	before := dataHash(t, h.f)
	if r := h.locks(lockAcquire("other", "w1", 1, 30)); r.Reason != command.Reason_KV_DISABLED || len(r.Results) != 0 {
		t.Fatalf("acquire with KV off: %v", r)
	}
	eq(t, "state after a refused call", dataHash(t, h.f), before)
}

// Lock calls are deterministic: two replicas of one log agree after every
// entry (the replay workload mixes them with everything else too).
func TestLockCallsReplayIdentically(t *testing.T) {
	src := newHarness(t)
	for i := 0; i < 60; i++ {
		src.advance(700 * time.Millisecond)
		owner := []string{"a", "b", "c"}[i%3]
		res := src.locks(lockAcquire("l1", owner, 2, 1), lockAcquire("l2", owner, 1, 2),
			&command.LockOp{Kind: command.LockOp_GET, Name: "l1"})
		if r := res.Results[1]; r.Ok && i%4 == 0 {
			src.locks(&command.LockOp{Kind: command.LockOp_RENEW, Name: "l2", Owner: owner, Token: r.Token, TtlSeconds: 3},
				&command.LockOp{Kind: command.LockOp_RELEASE, Name: "l1", Token: res.Results[0].Token, Slot: res.Results[0].Slot})
		}
		if i%10 == 0 {
			src.apply(&command.Command{Body: &command.Command_Sweep{Sweep: &command.Sweep{Limit: 5}}})
		}
	}
	a, _ := freshFSM(t)
	for _, l := range src.log {
		a.Apply(l)
	}
	eq(t, "replayed state", stateHash(t, a), stateHash(t, src.f))
	var n int
	src.f.db.View(func(r store.Reader) error {
		c := r.Cursor(kvstore.BucketEntries)
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		return nil
	})
	if n == 0 {
		t.Fatal("the workload left no permit to compare")
	}
}

// lockStep is the replay workload's lock call: acquires of a lock and a
// semaphore by a few owners, renews and releases with the tokens they got
// (and now and then a stale one), gets, and a guarded transaction.
func lockStep(h *harness, rng *rand.Rand) {
	owner := fmt.Sprint("o", rng.Intn(4))
	name := []string{"lk", "sem"}[rng.Intn(2)]
	limit, other := uint32(1), "sem"
	if name == "sem" {
		limit, other = 2, "lk"
	}
	res := h.locks(lockAcquire(name, owner, limit, int64(rng.Intn(3)+1)),
		&command.LockOp{Kind: command.LockOp_GET, Name: other})
	a := res.Results[0]
	if !a.Ok {
		return
	}
	token := a.Token - uint64(rng.Intn(2)) // sometimes stale
	switch rng.Intn(4) {
	case 0:
		h.locks(&command.LockOp{Kind: command.LockOp_RENEW, Name: name, Owner: []string{owner, ""}[rng.Intn(2)], Slot: a.Slot, Token: token, TtlSeconds: 2})
	case 1:
		h.locks(&command.LockOp{Kind: command.LockOp_RELEASE, Name: name, Slot: a.Slot, Token: token})
	case 2:
		h.txn(&command.Transaction{Kv: []*command.KVOp{locks.Guard(name, a.Slot, token),
			{Kind: command.KVOp_INCR, Ns: "c", Key: "guarded", Delta: 1, TtlSeconds: 5}}})
	}
}
