package locks

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/store"
)

const sec = int64(1e6)

// rig applies lock calls through a real state file, one entry per call,
// with the entry's index as the version, as apply does.
type rig struct {
	t     *testing.T
	db    *store.DB
	index uint64
}

func newRig(t *testing.T) *rig {
	db, err := store.Open(filepath.Join(t.TempDir(), "kv.db"), []store.Bucket{kvstore.BucketEntries, kvstore.BucketExpiry}, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &rig{t: t, db: db}
}

func (g *rig) call(now int64, ops ...*command.LockOp) []*command.LockResult {
	g.t.Helper()
	var out []*command.LockResult
	g.index++
	if err := g.db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		out = Apply(tx, ops, now, g.index)
		return tx.Commit()
	}); err != nil {
		g.t.Fatal(err)
	}
	return out
}

func (g *rig) one(now int64, op *command.LockOp) *command.LockResult {
	g.t.Helper()
	return g.call(now, op)[0]
}

// kv runs one KV op as its own entry (a transaction's guard, a hand-written row).
func (g *rig) kv(now int64, op *command.KVOp) *command.KVResult {
	g.t.Helper()
	var res *command.KVResult
	g.index++
	if err := g.db.Update(func(b *store.Batch) error {
		tx := b.Begin()
		res = kvstore.Apply(tx, op, now, g.index)
		return tx.Commit()
	}); err != nil {
		g.t.Fatal(err)
	}
	return res
}

func acquire(name, owner string, limit uint32, ttl int64) *command.LockOp {
	return &command.LockOp{Kind: command.LockOp_ACQUIRE, Name: name, Owner: owner, Limit: limit, TtlSeconds: ttl}
}

func renew(name, owner string, slot uint32, token uint64, ttl int64) *command.LockOp {
	return &command.LockOp{Kind: command.LockOp_RENEW, Name: name, Owner: owner, Slot: slot, Token: token, TtlSeconds: ttl}
}

func release(name string, slot uint32, token uint64) *command.LockOp {
	return &command.LockOp{Kind: command.LockOp_RELEASE, Name: name, Slot: slot, Token: token}
}

func get(name string) *command.LockOp { return &command.LockOp{Kind: command.LockOp_GET, Name: name} }

func TestAcquireRenewReleaseGet(t *testing.T) {
	g := newRig(t)
	a := g.one(10*sec, acquire("job", "w1", 1, 30))
	if !a.Ok || a.Already || a.Slot != 0 || a.Token != g.index || a.Owner != "w1" || a.SinceUs != 10*sec || a.ExpiresUs != 40*sec || a.AtUs != 10*sec {
		t.Fatalf("acquire of a free lock: %v", a)
	}
	got := g.one(11*sec, get("job"))
	if !got.Ok || len(got.Holders) != 1 {
		t.Fatalf("get of a held lock: %v", got)
	}
	if h := got.Holders[0]; h.Slot != 0 || h.Owner != "w1" || !h.HasOwner || h.Token != a.Token || h.SinceUs != 10*sec || h.RenewedUs != 10*sec || h.ExpiresUs != 40*sec {
		t.Fatalf("holder: %v", h)
	}
	r := g.one(20*sec, renew("job", "", 0, a.Token, 30))
	if !r.Ok || r.Token != g.index || r.Token == a.Token || r.SinceUs != 10*sec || r.ExpiresUs != 50*sec || r.Owner != "w1" {
		t.Fatalf("renew with the live token: %v", r)
	}
	if h := g.one(21*sec, get("job")).Holders[0]; h.Token != r.Token || h.SinceUs != 10*sec || h.RenewedUs != 20*sec || h.ExpiresUs != 50*sec {
		t.Fatalf("holder after the renew (since must not move): %v", h)
	}
	rel := g.one(22*sec, release("job", 0, r.Token))
	if !rel.Ok || rel.Token != r.Token {
		t.Fatalf("release with the live token: %v", rel)
	}
	if got := g.one(23*sec, get("job")); !got.Ok || len(got.Holders) != 0 {
		t.Fatalf("get of a released lock: %v", got)
	}
	if again := g.one(24*sec, release("job", 0, r.Token)); again.Ok || again.Reason != command.LockResult_LOST || len(again.Holders) != 0 {
		t.Fatalf("a second release: %v", again)
	}
	if b := g.one(25*sec, acquire("job", "w2", 1, 5)); !b.Ok || b.Token <= r.Token {
		t.Fatalf("acquire after the release: %v", b)
	}
}

func TestSemaphoreSlots(t *testing.T) {
	g := newRig(t)
	a := g.one(0, acquire("gpu", "a", 2, 60))
	b := g.one(1, acquire("gpu", "b", 2, 60))
	if !a.Ok || !b.Ok || a.Slot != 0 || b.Slot != 1 {
		t.Fatalf("two permits of two: %v / %v", a, b)
	}
	c := g.one(2, acquire("gpu", "c", 2, 60))
	if c.Ok || c.Reason != command.LockResult_HELD || len(c.Holders) != 2 || c.Holders[0].Owner != "a" || c.Holders[1].Owner != "b" {
		t.Fatalf("a third holder of two permits: %v", c)
	}
	// A caller with a larger limit sees the free slots beyond.
	if d := g.one(3, acquire("gpu", "d", 3, 60)); !d.Ok || d.Slot != 2 {
		t.Fatalf("limit 3 beside holders of limit 2: %v", d)
	}
	// A smaller limit sees only the low slots: full.
	if e := g.one(4, acquire("gpu", "e", 1, 60)); e.Ok || len(e.Holders) != 1 || e.Holders[0].Slot != 0 {
		t.Fatalf("limit 1 beside holders of 0 and 1: %v", e)
	}
	if r := g.one(5, release("gpu", 0, a.Token)); !r.Ok {
		t.Fatalf("release of slot 0: %v", r)
	}
	if c := g.one(6, acquire("gpu", "c", 2, 60)); !c.Ok || c.Slot != 0 {
		t.Fatalf("acquire after slot 0 was released: %v", c)
	}
	if got := g.one(7, get("gpu")); len(got.Holders) != 3 || got.Holders[0].Owner != "c" || got.Holders[1].Owner != "b" || got.Holders[2].Owner != "d" {
		t.Fatalf("get lists every permit whatever the limit: %v", got)
	}
}

func TestExpiryIsByEntryTime(t *testing.T) {
	g := newRig(t)
	a := g.one(100*sec, acquire("cron", "w1", 1, 2))
	if b := g.one(102*sec-1, acquire("cron", "w2", 1, 2)); b.Ok {
		t.Fatalf("acquired 1 µs before the permit ends: %v", b)
	}
	if r := g.one(102*sec-1, renew("cron", "", 0, a.Token, 2)); !r.Ok || r.ExpiresUs != 104*sec-1 {
		t.Fatalf("renew 1 µs before the end: %v", r)
	} else {
		a = r
	}
	if b := g.one(104*sec-2, acquire("cron", "w2", 1, 2)); b.Ok {
		t.Fatalf("acquired before the renewed permit ends: %v", b)
	}
	b := g.one(104*sec-1, acquire("cron", "w2", 1, 2))
	if !b.Ok || b.Token <= a.Token || b.SinceUs != 104*sec-1 {
		t.Fatalf("acquire at the renewed permit's expiry: %v", b)
	}
	// The expired holder can neither renew nor release.
	if r := g.one(105*sec, renew("cron", "", 0, a.Token, 2)); r.Ok || r.Reason != command.LockResult_LOST || len(r.Holders) != 1 || r.Holders[0].Owner != "w2" {
		t.Fatalf("renew by the holder that expired: %v", r)
	}
	if r := g.one(105*sec, release("cron", 0, a.Token)); r.Ok || r.Reason != command.LockResult_LOST {
		t.Fatalf("release by the holder that expired: %v", r)
	}
	// A permit nobody took again is free at its expiry, and cannot be renewed.
	if r := g.one(200*sec, renew("cron", "", 0, b.Token, 2)); r.Ok || len(r.Holders) != 0 {
		t.Fatalf("renew of an expired permit: %v", r)
	}
	if got := g.one(200*sec, get("cron")); len(got.Holders) != 0 {
		t.Fatalf("get of an expired permit: %v", got)
	}
}

func TestTheSameOwnerRetryingConverges(t *testing.T) {
	g := newRig(t)
	a := g.one(0, acquire("job", "w1", 1, 30))
	idx := g.index
	again := g.one(sec, acquire("job", "w1", 1, 30))
	if !again.Ok || !again.Already || again.Token != a.Token || again.Slot != 0 || again.ExpiresUs != a.ExpiresUs || again.SinceUs != a.SinceUs {
		t.Fatalf("the owner's retried acquire: %v", again)
	}
	if v := g.kv(2*sec, &command.KVOp{Kind: command.KVOp_GET, Ns: Namespace, Key: "job#0"}); v.Version != idx {
		t.Fatalf("a retried acquire rewrote the permit: version %d, want %d", v.Version, idx)
	}
	// Without an owner a retry cannot be told from a stranger: held.
	anon := g.one(3*sec, acquire("solo", "", 1, 30))
	if r := g.one(4*sec, acquire("solo", "", 1, 30)); r.Ok || r.Reason != command.LockResult_HELD || len(r.Holders) != 1 || r.Holders[0].HasOwner {
		t.Fatalf("an anonymous retried acquire: %v", r)
	}
	_ = anon
	// In a semaphore the owner gets its own slot back, not another one.
	g.one(5*sec, acquire("pool", "x", 3, 30))
	p := g.one(6*sec, acquire("pool", "w1", 3, 30))
	if r := g.one(7*sec, acquire("pool", "w1", 3, 30)); !r.Ok || !r.Already || r.Slot != p.Slot || r.Token != p.Token {
		t.Fatalf("the owner's retried semaphore acquire: %v (first %v)", r, p)
	}
	// A renew that landed but whose answer was lost, retried with the old
	// token and the owner: carried through at the current token.
	r1 := g.one(8*sec, renew("job", "w1", 0, a.Token, 30))
	r2 := g.one(9*sec, renew("job", "w1", 0, a.Token, 30))
	if !r1.Ok || !r2.Ok || r2.Token <= r1.Token || r2.SinceUs != a.SinceUs {
		t.Fatalf("the owner's retried renew: %v then %v", r1, r2)
	}
	// ... but not without the owner, nor with another's.
	for _, owner := range []string{"", "w2"} {
		if r := g.one(10*sec, renew("job", owner, 0, a.Token, 30)); r.Ok || r.Reason != command.LockResult_LOST || r.Holders[0].Owner != "w1" {
			t.Fatalf("renew with a stale token as %q: %v", owner, r)
		}
	}
}

func TestAStaleTokenIsRefused(t *testing.T) {
	g := newRig(t)
	a := g.one(0, acquire("job", "w1", 1, 30))
	r := g.one(sec, renew("job", "w1", 0, a.Token, 30))
	// The token before the renew no longer releases.
	if rel := g.one(2*sec, release("job", 0, a.Token)); rel.Ok || rel.Reason != command.LockResult_LOST || len(rel.Holders) != 1 || rel.Holders[0].Token != r.Token {
		t.Fatalf("release with the token before the renew: %v", rel)
	}
	// A token of another slot, or of nothing, is refused too.
	if rel := g.one(3*sec, release("job", 1, r.Token)); rel.Ok {
		t.Fatalf("release of slot 1 with slot 0's token: %v", rel)
	}
	if rn := g.one(4*sec, renew("job", "", 0, r.Token+100, 30)); rn.Ok {
		t.Fatalf("renew with a token nobody has: %v", rn)
	}
	if rel := g.one(5*sec, release("job", 0, r.Token)); !rel.Ok {
		t.Fatalf("release with the live token: %v", rel)
	}
}

// The guard: a worker that lost its lock can never commit.
func TestTheGuardFailsOnceTheLockIsLost(t *testing.T) {
	g := newRig(t)
	a := g.one(0, acquire("job", "w1", 1, 2))
	guard := Guard("job", a.Slot, a.Token)
	if guard.Ns != Namespace || guard.Key != "job#0" || guard.Kind != command.KVOp_CHECK || !guard.Required || !guard.HasExpect || guard.Expect != a.Token {
		t.Fatalf("guard: %v", guard)
	}
	if c := g.kv(sec, guard); !c.Applied {
		t.Fatalf("guard while the lock is held: %v", c)
	}
	// Expired: nobody holds it, the guard fails.
	if c := g.kv(2*sec, guard); c.Applied || c.Reason != command.KVResult_ABSENT {
		t.Fatalf("guard after the permit expired: %v", c)
	}
	// Taken by another: the guard fails on the version.
	b := g.one(3*sec, acquire("job", "w2", 1, 2))
	if c := g.kv(3*sec, guard); c.Applied || c.Reason != command.KVResult_VERSION {
		t.Fatalf("guard after another worker acquired: %v", c)
	}
	if c := g.kv(3*sec, Guard("job", b.Slot, b.Token)); !c.Applied {
		t.Fatalf("the new holder's guard: %v", c)
	}
	// Renewed: the guard of the token before fails, the new one holds.
	r := g.one(4*sec, renew("job", "", 0, b.Token, 2))
	if c := g.kv(4*sec, Guard("job", 0, b.Token)); c.Applied {
		t.Fatalf("guard of the token before a renew: %v", c)
	}
	if c := g.kv(4*sec, Guard("job", 0, r.Token)); !c.Applied {
		t.Fatalf("guard of the renewed token: %v", c)
	}
	// Released: the guard fails.
	g.one(5*sec, release("job", 0, r.Token))
	if c := g.kv(5*sec, Guard("job", 0, r.Token)); c.Applied {
		t.Fatalf("guard after the release: %v", c)
	}
}

func TestOpsOfOneCallAreIndependent(t *testing.T) {
	g := newRig(t)
	g.one(0, acquire("b", "x", 1, 30))
	res := g.call(sec, acquire("a", "w", 1, 30), acquire("b", "w", 1, 30), release("c", 0, 7), get("a"))
	if !res[0].Ok || res[1].Ok || res[2].Ok || !res[3].Ok || len(res[3].Holders) != 1 {
		t.Fatalf("one call, four independent ops: %v", res)
	}
	for i, r := range res {
		if r.AtUs != sec {
			t.Fatalf("op %d: at %d", i, r.AtUs)
		}
	}
	if res[0].Token != g.index {
		t.Fatalf("token %d, want the entry's index %d", res[0].Token, g.index)
	}
}

func TestRowsOfOtherKeysAreNotPermits(t *testing.T) {
	g := newRig(t)
	for _, k := range []string{"gpu#07", "gpu#x", "gpus#1", "gpu#1024", "gpu#1#2"} {
		g.kv(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: Namespace, Key: k, Value: []byte(`{"owner":"z"}`), Forever: true})
	}
	// A row written by hand at a slot's key holds it, with no owner.
	g.kv(0, &command.KVOp{Kind: command.KVOp_PUT, Ns: Namespace, Key: "gpu#1", Value: []byte(`"by hand"`), TtlSeconds: 60})
	got := g.one(sec, get("gpu"))
	if len(got.Holders) != 1 || got.Holders[0].Slot != 1 || got.Holders[0].HasOwner {
		t.Fatalf("get among foreign rows: %v", got)
	}
	a := g.one(sec, acquire("gpu", "w", 2, 30))
	if !a.Ok || a.Slot != 0 {
		t.Fatalf("acquire beside a row written by hand: %v", a)
	}
	if b := g.one(sec, acquire("gpu", "v", 2, 30)); b.Ok || len(b.Holders) != 2 || b.Holders[1].HasOwner {
		t.Fatalf("a full semaphore with a hand-written permit: %v", b)
	}
}

func TestNamesKeysAndSlots(t *testing.T) {
	for _, ok := range []string{"a", "daily-report", "order/9137:sync", "täglich", strings.Repeat("x", MaxNameBytes)} {
		if !ValidName(ok) {
			t.Errorf("ValidName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "a#b", "a\nb", "a\x00b", "a\x7fb", "\xff", strings.Repeat("x", MaxNameBytes+1)} {
		if ValidName(bad) {
			t.Errorf("ValidName(%q) = true", bad)
		}
	}
	if !ValidOwner("host:1:abc") || ValidOwner("") || ValidOwner("a\tb") || ValidOwner(strings.Repeat("o", MaxOwnerBytes+1)) {
		t.Error("ValidOwner")
	}
	if Key("gpu", 12) != "gpu#12" {
		t.Error(Key("gpu", 12))
	}
	if s, ok := SlotOf("gpu", "gpu#1023"); !ok || s != 1023 {
		t.Error("gpu#1023")
	}
	for _, k := range []string{"gpu", "gpu#", "gpu#x", "gpu#07", "gpu#+7", "gpu#-1", "gpu#1024", "gpus#1", "gp#1", "gpu#1#2", "gpu#1 "} {
		if _, ok := SlotOf("gpu", k); ok {
			t.Errorf("SlotOf(gpu, %q) took it for a permit", k)
		}
	}
}
