package workload

import (
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/history"
)

// Synthetic lock histories: broker times are seconds after a base.
var lockBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func bt(sec float64) string {
	return lockBase.Add(time.Duration(sec * float64(time.Second))).Format("2006-01-02T15:04:05.000000Z")
}

// stampOf is the stamp put's expiresAt of a commit at sec (millisecond
// precision, as the KV route reports it).
func stampOf(sec float64) string {
	return lockBase.Add(time.Duration(sec*float64(time.Second)) + lockStampTTL*time.Second).Format("2006-01-02T15:04:05.000Z")
}

func granted(name, owner string, slot int, token uint64, since, at, expires float64, op string) lockOut {
	t := true
	o := lockOut{Op: op, Name: name, Slot: slot, Token: token, Owner: sp(owner), Since: bt(since), ExpiresAt: bt(expires)}
	if op == "acquire" {
		o.Acquired = &t
	} else {
		o.Renewed, o.RenewedAt = &t, bt(at)
	}
	return o
}

func released(name string, at float64) lockOut {
	t := true
	return lockOut{Op: "release", Name: name, Released: &t, ReleasedAt: bt(at)}
}

// A clean history: w1 holds, renews, commits, releases; w2 acquires after
// the release and commits; a stale commit of w1 was refused.
func cleanLockHistory() []hop {
	return []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w1", Limit: 1}, out: granted("L", "w1", 0, 10, 1, 1, 3, "acquire")},
		{client: 1, kind: lockRenewKind, in: lockIn{Name: "L", Owner: "w1", Token: 10}, out: granted("L", "w1", 0, 12, 1, 2, 4, "renew")},
		{client: 1, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w1", Token: 12}, out: lockTxnOut{Success: true, Index: 13, StampAt: stampOf(2.5)}},
		{client: 1, kind: lockReleaseKind, in: lockIn{Name: "L", Token: 12}, out: released("L", 2.6)},
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w2", Limit: 1}, out: granted("L", "w2", 0, 20, 2.7, 2.7, 4.7, "acquire")},
		{client: 1, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w1", Token: 12}, out: lockTxnOut{Reason: "kv_precondition"}},
		{client: 2, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w2", Token: 20}, out: lockTxnOut{Success: true, Index: 21, StampAt: stampOf(3)}},
		{client: 3, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w3", Token: 20}, status: history.Unknown},
		{client: 4, kind: lockGetKind, in: lockIn{Name: "L"}, out: lockOut{Op: "get", Name: "L", Held: boolp(true), Holders: []lockHolderOut{
			{Slot: 0, Owner: sp("w2"), Token: 20, Since: bt(2.7), RenewedAt: bt(2.7), ExpiresAt: bt(4.7)}}}},
	}
}

func TestLocksCheckerPassesACleanHistory(t *testing.T) {
	res := checkLocks(mustOps(t, cleanLockHistory()), map[string]int64{"L": 2})
	want{ok: true}.check(t, res)
	// The unknown commit may have happened.
	want{ok: true}.check(t, checkLocks(mustOps(t, cleanLockHistory()), map[string]int64{"L": 3}))
}

func TestLocksCheckerFindsTwoHoldersAtOnce(t *testing.T) {
	h := []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w1"}, out: granted("L", "w1", 0, 10, 1, 1, 3, "acquire")},
		// w2 got the slot at 2.5, before w1's permit ended at 3.
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w2"}, out: granted("L", "w2", 0, 11, 2.5, 2.5, 4.5, "acquire")},
	}
	want{violations: []string{"L#0 held twice at once"}}.check(t, checkLocks(mustOps(t, h), nil))
	// Seen only in a get's holders, it is caught the same.
	h[1] = hop{client: 3, kind: lockGetKind, in: lockIn{Name: "L"}, out: lockOut{Op: "get", Name: "L", Holders: []lockHolderOut{
		{Slot: 0, Owner: sp("w2"), Token: 11, Since: bt(2.5), RenewedAt: bt(2.5), ExpiresAt: bt(4.5)}}}}
	want{violations: []string{"held twice at once"}}.check(t, checkLocks(mustOps(t, h), nil))
	// A renew seen by nobody but the holders of a refusal extends the first.
	h = []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w1"}, out: granted("L", "w1", 0, 10, 1, 1, 3, "acquire")},
		{client: 3, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w3"}, out: lockOut{Op: "acquire", Name: "L", Acquired: boolp(false), Reason: "held",
			Holders: []lockHolderOut{{Slot: 0, Owner: sp("w1"), Token: 11, Since: bt(1), RenewedAt: bt(2.9), ExpiresAt: bt(4.9)}}}},
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w2"}, out: granted("L", "w2", 0, 12, 4, 4, 6, "acquire")},
	}
	want{violations: []string{"held twice at once"}}.check(t, checkLocks(mustOps(t, h), nil))
	// Slots of a semaphore are independent.
	h = []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "S", Owner: "w1"}, out: granted("S", "w1", 0, 10, 1, 1, 3, "acquire")},
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "S", Owner: "w2"}, out: granted("S", "w2", 1, 11, 2, 2, 4, "acquire")},
	}
	want{ok: true}.check(t, checkLocks(mustOps(t, h), nil))
}

func TestLocksCheckerSkipsATenureWhoseReleaseIsUnknown(t *testing.T) {
	h := []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w1"}, out: granted("L", "w1", 0, 10, 1, 1, 3, "acquire")},
		{client: 1, kind: lockReleaseKind, in: lockIn{Name: "L", Token: 10}, status: history.Unknown},
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w2"}, out: granted("L", "w2", 0, 11, 2, 2, 4, "acquire")},
	}
	want{ok: true}.check(t, checkLocks(mustOps(t, h), nil))
	// A definite release ends the tenure where the broker said.
	h[1] = hop{client: 1, kind: lockReleaseKind, in: lockIn{Name: "L", Token: 10}, out: released("L", 2.5)}
	want{violations: []string{"held twice at once"}}.check(t, checkLocks(mustOps(t, h), nil))
}

func TestLocksCheckerFindsAStaleGuardThatCommitted(t *testing.T) {
	base := []hop{
		{client: 1, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w1"}, out: granted("L", "w1", 0, 10, 1, 1, 3, "acquire")},
		{client: 2, kind: lockAcquireKind, in: lockIn{Name: "L", Owner: "w2"}, out: granted("L", "w2", 0, 15, 3.2, 3.2, 5.2, "acquire")},
	}
	cases := []struct {
		name string
		txn  lockTxnOut
		want string
	}{
		{"superseded", lockTxnOut{Success: true, Index: 16, StampAt: stampOf(2)}, "superseded by token 15"},
		{"after its expiry", lockTxnOut{Success: true, Index: 14, StampAt: stampOf(3.1)}, "after its permit expired"},
		{"no commit time", lockTxnOut{Success: true, Index: 14}, "no commit time"},
		{"another answer", lockTxnOut{Reason: "rejected_ack"}, "neither success nor kv_precondition"},
	}
	for _, c := range cases {
		h := append(append([]hop{}, base...), hop{client: 1, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w1", Token: 10}, out: c.txn})
		want{violations: []string{c.want}}.check(t, checkLocks(mustOps(t, h), nil))
	}
	// After its release.
	h := append(append([]hop{}, base[0]), hop{client: 1, kind: lockReleaseKind, in: lockIn{Name: "L", Token: 10}, out: released("L", 1.5)},
		hop{client: 1, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w1", Token: 10}, out: lockTxnOut{Success: true, Index: 12, StampAt: stampOf(1.7)}})
	want{violations: []string{"after its permit was released"}}.check(t, checkLocks(mustOps(t, h), nil))
	// The same commit in time is fine.
	h = append(append([]hop{}, base...), hop{client: 1, kind: lockTxnKind, in: lockIn{Name: "L", Owner: "w1", Token: 10}, out: lockTxnOut{Success: true, Index: 12, StampAt: stampOf(2.9)}})
	want{ok: true}.check(t, checkLocks(mustOps(t, h), nil))
}

func TestLocksCheckerComparesTheCounters(t *testing.T) {
	want{lost: 1, violations: []string{"after 2 guarded commits"}}.check(t, checkLocks(mustOps(t, cleanLockHistory()), map[string]int64{"L": 1}))
	want{duplicated: 1, violations: []string{"at most 3"}}.check(t, checkLocks(mustOps(t, cleanLockHistory()), map[string]int64{"L": 4}))
}

func TestLocksCheckerFindsAnswersThatDisagree(t *testing.T) {
	h := cleanLockHistory()
	h = append(h, hop{client: 4, kind: lockGetKind, in: lockIn{Name: "L"}, out: lockOut{Op: "get", Name: "L", Holders: []lockHolderOut{
		{Slot: 0, Owner: sp("w2"), Token: 20, Since: bt(2.7), RenewedAt: bt(2.7), ExpiresAt: bt(9)}}}})
	want{violations: []string{"token 20"}}.check(t, checkLocks(mustOps(t, h), map[string]int64{"L": 2}))
}
