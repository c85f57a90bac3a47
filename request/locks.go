package request

import (
	"fmt"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
)

// LockOp is one lock op as a front end decoded it (addendum §4.3). The Has
// fields say whether an optional member was sent (null counts as absent).
type LockOp struct {
	Op       string // acquire | renew | release | get
	Name     string
	HasName  bool
	Owner    string
	HasOwner bool
	Limit    int64
	HasLimit bool
	TTL      int64 // ttlSeconds
	HasTTL   bool
	Forever  bool // a forever member was sent at all: a lock has no forever
	Token    int64
	HasToken bool
	Slot     int64
	HasSlot  bool
}

// LocksBad is a malformed lock call: 400
// {"error":"locks_bad_request","reason":...,"detail":...}, nothing applied.
func LocksBad(reason, detail string) *Error {
	return &Error{Kind: Invalid, Msg: "locks_bad_request", Reason: reason, Detail: detail}
}

var lockKinds = map[string]command.LockOp_Kind{
	"acquire": command.LockOp_ACQUIRE, "renew": command.LockOp_RENEW, "release": command.LockOp_RELEASE, "get": command.LockOp_GET,
}

var lockNames = map[command.LockOp_Kind]string{
	command.LockOp_ACQUIRE: "acquire", command.LockOp_RENEW: "renew", command.LockOp_RELEASE: "release", command.LockOp_GET: "get",
}

// LockOpName is an op kind's name in the API.
func LockOpName(k command.LockOp_Kind) string { return lockNames[k] }

// Locks validates POST /api/v1/locks, every op before any is applied: at
// most 64 ops, each on a different lock, and the acquires of one call scan
// at most 4,096 slots. An empty call is valid (and applies nothing).
func Locks(in []LockOp) ([]*command.LockOp, error) {
	if len(in) > locks.MaxOps {
		return nil, LocksBad("locks_too_many_ops", fmt.Sprintf("%d operations in one call; at most %d", len(in), locks.MaxOps))
	}
	ops := make([]*command.LockOp, 0, len(in))
	seen := map[string]bool{}
	slots := 0
	for i := range in {
		op, err := lockOp(i, &in[i])
		if err != nil {
			return nil, err
		}
		if seen[op.Name] {
			return nil, LocksBad("locks_duplicate_in_call", OpAt(i)+"the lock "+op.Name+" is named by another operation of this call; one operation per lock")
		}
		seen[op.Name] = true
		slots += int(max(op.Limit, 1))
		ops = append(ops, op)
	}
	if slots > locks.MaxSlots {
		return nil, LocksBad("locks_too_many_keys", fmt.Sprintf("the call names %d permits; at most %d", slots, locks.MaxSlots))
	}
	return ops, nil
}

func lockOp(i int, in *LockOp) (*command.LockOp, error) {
	at := OpAt(i)
	kind, ok := lockKinds[in.Op]
	if !ok {
		return nil, LocksBad("locks_unknown_op", at+`op must be "acquire", "renew", "release" or "get"`)
	}
	if !in.HasName || !locks.ValidName(in.Name) {
		return nil, LocksBad("locks_bad_name", at+fmt.Sprintf("name must be a string of 1 to %d bytes, without control characters and without '#'", locks.MaxNameBytes))
	}
	op := &command.LockOp{Kind: kind, Name: in.Name}
	if kind == command.LockOp_GET {
		return op, nil
	}
	if kind != command.LockOp_RELEASE {
		switch {
		case in.Forever:
			return nil, LocksBad("locks_ttl_required", at+"a lock has no forever: it takes ttlSeconds, and a holder that needs longer renews")
		case !in.HasTTL:
			return nil, LocksBad("locks_ttl_required", at+in.Op+" needs ttlSeconds (an integer > 0)")
		case in.TTL <= 0 || in.TTL > MaxSeconds:
			return nil, LocksBad("locks_bad_ttl", at+fmt.Sprintf("ttlSeconds must be an integer from 1 to %d", MaxSeconds))
		}
		op.TtlSeconds = in.TTL
		if in.HasOwner {
			if !locks.ValidOwner(in.Owner) {
				return nil, LocksBad("locks_bad_owner", at+fmt.Sprintf("owner must be a string of 1 to %d bytes, without control characters", locks.MaxOwnerBytes))
			}
			op.Owner = in.Owner
		}
	}
	if kind == command.LockOp_ACQUIRE {
		op.Limit = 1
		if in.HasLimit {
			if in.Limit < 1 || in.Limit > locks.MaxLimit {
				return nil, LocksBad("locks_bad_limit", at+fmt.Sprintf("limit must be an integer from 1 (a lock) to %d", locks.MaxLimit))
			}
			op.Limit = uint32(in.Limit)
		}
		return op, nil
	}
	// renew, release: the permit's slot and token.
	if in.HasSlot {
		if in.Slot < 0 || in.Slot >= locks.MaxLimit {
			return nil, LocksBad("locks_bad_slot", at+fmt.Sprintf("slot must be an integer from 0 to %d", locks.MaxLimit-1))
		}
		op.Slot = uint32(in.Slot)
	}
	switch {
	case !in.HasToken:
		return nil, LocksBad("locks_token_required", at+in.Op+" needs the permit's token (the one the last acquire or renew answered)")
	case in.Token <= 0:
		return nil, LocksBad("locks_bad_token", at+"token must be an integer > 0")
	}
	op.Token = uint64(in.Token)
	return op, nil
}

// LocksVerdict is the error a lock call's result is answered with, or nil:
// the operator's KV switch stops locks as it stops the KV routes.
func LocksVerdict(res *command.LocksResult) *Error {
	if res.Reason == command.Reason_KV_DISABLED {
		return &Error{Kind: Unavailable, Msg: errKVOff, Code: "kv_disabled", RetryAfter: 5}
	}
	return nil
}
