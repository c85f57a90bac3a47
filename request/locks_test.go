package request

import (
	"fmt"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/command"
)

func TestLocks(t *testing.T) {
	acq := func(name string) LockOp {
		return LockOp{Op: "acquire", Name: name, HasName: true, TTL: 30, HasTTL: true}
	}
	ok, err := Locks([]LockOp{
		acq("daily-report"),
		{Op: "acquire", Name: "gpu", HasName: true, TTL: 60, HasTTL: true, Owner: "w-1", HasOwner: true, Limit: 4, HasLimit: true},
		{Op: "renew", Name: "a", HasName: true, Token: 7, HasToken: true, TTL: 30, HasTTL: true},
		{Op: "renew", Name: "b", HasName: true, Token: 8, HasToken: true, TTL: 30, HasTTL: true, Slot: 3, HasSlot: true, Owner: "w-1", HasOwner: true},
		{Op: "release", Name: "c", HasName: true, Token: 9, HasToken: true},
		{Op: "get", Name: "d", HasName: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []*command.LockOp{
		{Kind: command.LockOp_ACQUIRE, Name: "daily-report", TtlSeconds: 30, Limit: 1},
		{Kind: command.LockOp_ACQUIRE, Name: "gpu", TtlSeconds: 60, Owner: "w-1", Limit: 4},
		{Kind: command.LockOp_RENEW, Name: "a", Token: 7, TtlSeconds: 30},
		{Kind: command.LockOp_RENEW, Name: "b", Token: 8, TtlSeconds: 30, Slot: 3, Owner: "w-1"},
		{Kind: command.LockOp_RELEASE, Name: "c", Token: 9},
		{Kind: command.LockOp_GET, Name: "d"},
	}
	for i := range want {
		if fmt.Sprint(ok[i]) != fmt.Sprint(want[i]) {
			t.Errorf("op %d: %v, want %v", i, ok[i], want[i])
		}
	}
	if ops, err := Locks(nil); err != nil || len(ops) != 0 {
		t.Fatalf("an empty call: %v %v", ops, err)
	}

	with := func(f func(*LockOp)) []LockOp { op := acq("a"); f(&op); return []LockOp{op} }
	many := func(n int, f func(i int) LockOp) []LockOp {
		out := make([]LockOp, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	bad := []struct {
		name, reason string
		in           []LockOp
	}{
		{"no op", "locks_unknown_op", with(func(o *LockOp) { o.Op = "" })},
		{"unknown op", "locks_unknown_op", with(func(o *LockOp) { o.Op = "lock" })},
		{"no name", "locks_bad_name", with(func(o *LockOp) { o.HasName, o.Name = false, "" })},
		{"empty name", "locks_bad_name", with(func(o *LockOp) { o.Name = "" })},
		{"name with #", "locks_bad_name", with(func(o *LockOp) { o.Name = "a#1" })},
		{"name with a control char", "locks_bad_name", with(func(o *LockOp) { o.Name = "a\nb" })},
		{"name with NUL", "locks_bad_name", with(func(o *LockOp) { o.Name = "a\x00b" })},
		{"name too long", "locks_bad_name", with(func(o *LockOp) { o.Name = strings.Repeat("x", 257) })},
		{"name not UTF-8", "locks_bad_name", with(func(o *LockOp) { o.Name = "\xff" })},
		{"no ttl", "locks_ttl_required", with(func(o *LockOp) { o.HasTTL = false })},
		{"forever", "locks_ttl_required", with(func(o *LockOp) { o.Forever = true })},
		{"ttl 0", "locks_bad_ttl", with(func(o *LockOp) { o.TTL = 0 })},
		{"ttl negative", "locks_bad_ttl", with(func(o *LockOp) { o.TTL = -5 })},
		{"ttl too large", "locks_bad_ttl", with(func(o *LockOp) { o.TTL = MaxSeconds + 1 })},
		{"empty owner", "locks_bad_owner", with(func(o *LockOp) { o.Owner, o.HasOwner = "", true })},
		{"owner too long", "locks_bad_owner", with(func(o *LockOp) { o.Owner, o.HasOwner = strings.Repeat("o", 257), true })},
		{"owner with a control char", "locks_bad_owner", with(func(o *LockOp) { o.Owner, o.HasOwner = "a\tb", true })},
		{"limit 0", "locks_bad_limit", with(func(o *LockOp) { o.Limit, o.HasLimit = 0, true })},
		{"limit 1025", "locks_bad_limit", with(func(o *LockOp) { o.Limit, o.HasLimit = 1025, true })},
		{"renew without token", "locks_token_required", []LockOp{{Op: "renew", Name: "a", HasName: true, TTL: 1, HasTTL: true}}},
		{"renew without ttl", "locks_ttl_required", []LockOp{{Op: "renew", Name: "a", HasName: true, Token: 1, HasToken: true}}},
		{"release without token", "locks_token_required", []LockOp{{Op: "release", Name: "a", HasName: true}}},
		{"token 0", "locks_bad_token", []LockOp{{Op: "release", Name: "a", HasName: true, HasToken: true}}},
		{"slot -1", "locks_bad_slot", []LockOp{{Op: "release", Name: "a", HasName: true, Token: 7, HasToken: true, Slot: -1, HasSlot: true}}},
		{"slot 1024", "locks_bad_slot", []LockOp{{Op: "release", Name: "a", HasName: true, Token: 7, HasToken: true, Slot: 1024, HasSlot: true}}},
		{"one lock twice", "locks_duplicate_in_call", []LockOp{{Op: "get", Name: "a", HasName: true}, {Op: "release", Name: "a", HasName: true, Token: 7, HasToken: true}}},
		{"65 ops", "locks_too_many_ops", many(65, func(i int) LockOp { return LockOp{Op: "get", Name: fmt.Sprint("l", i), HasName: true} })},
		{"4,097 slots", "locks_too_many_keys", many(5, func(i int) LockOp {
			o := acq(fmt.Sprint("s", i))
			o.Limit, o.HasLimit = 1024, true
			return o
		})},
	}
	for _, c := range bad {
		_, err := Locks(c.in)
		wantErr(t, c.name, err, Invalid, c.reason)
		if e := err.(*Error); e.Msg != "locks_bad_request" || e.Reason != c.reason || e.Detail == "" {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
	if _, err := Locks(many(64, func(i int) LockOp { return LockOp{Op: "get", Name: fmt.Sprint("l", i), HasName: true} })); err != nil {
		t.Fatalf("64 ops: %v", err)
	}
}
