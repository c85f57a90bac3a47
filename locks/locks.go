package locks

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/store"
)

// Limits of a call and of a lock (addendum §4.3).
const (
	// Namespace is the KV namespace every permit lives in: an ordinary one,
	// whose rows the KV routes read, list and (a stuck lock) delete.
	Namespace = "queen-locks"
	// Sep is between a name and its slot; a name may not contain it, so
	// "<name>#" is one lock's prefix and no other's.
	Sep = '#'

	MaxOps        = 64   // operations of one call
	MaxLimit      = 1024 // permits of one semaphore
	MaxSlots      = 4096 // slots the acquires of one call may scan
	MaxNameBytes  = 256
	MaxOwnerBytes = 256
)

// ValidName reports whether name can name a lock: 1..MaxNameBytes bytes of
// UTF-8, no control character, no Sep.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameBytes || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r == Sep || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// ValidOwner reports whether owner can name a holder: 1..MaxOwnerBytes
// bytes of UTF-8, no control character.
func ValidOwner(owner string) bool {
	if owner == "" || len(owner) > MaxOwnerBytes || !utf8.ValidString(owner) {
		return false
	}
	for _, r := range owner {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// Key is the KV key of one permit.
func Key(name string, slot uint32) string {
	return name + string(Sep) + strconv.FormatUint(uint64(slot), 10)
}

// SlotOf is the slot a key of name's permits names: exactly the decimal
// Key writes, below MaxLimit ("a#07" or "a#+7" are somebody else's rows).
func SlotOf(name, key string) (uint32, bool) {
	digits, ok := strings.CutPrefix(key, name+string(Sep))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n >= MaxLimit || strconv.FormatUint(n, 10) != digits {
		return 0, false
	}
	return uint32(n), true
}

// Guard is the KV op that holds while the permit is still its holder's: a
// required check of the permit's row at the token's version. In a
// transaction's kv array it lets the transaction commit only while the
// caller holds the permit.
func Guard(name string, slot uint32, token uint64) *command.KVOp {
	return &command.KVOp{Kind: command.KVOp_CHECK, Ns: Namespace, Key: Key(name, slot),
		HasExpect: true, Expect: token, Required: true}
}

// value is a permit row's value: the owner, null without one.
func value(owner string) []byte {
	var v struct {
		Owner *string `json:"owner"`
	}
	if owner != "" {
		v.Owner = &owner
	}
	b, _ := json.Marshal(v)
	return b
}

// ownerOf is the owner a row's value names. A row written by hand through
// the KV routes may hold anything: it then has no owner, and holds its slot
// all the same.
func ownerOf(row *command.KVRow) (string, bool) {
	var v struct {
		Owner *string `json:"owner"`
	}
	if json.Unmarshal(row.Value, &v) != nil || v.Owner == nil {
		return "", false
	}
	return *v.Owner, true
}

func holder(slot uint32, row *command.KVRow) *command.LockHolder {
	owner, has := ownerOf(row)
	return &command.LockHolder{Slot: slot, Owner: owner, HasOwner: has, Token: row.Version,
		SinceUs: row.CreatedUs, RenewedUs: row.UpdatedUs, ExpiresUs: row.ExpiresUs}
}

// Apply decides one call's ops at entry time now, in order; index is the
// entry's index, the token of every permit it writes. The ops are
// independent: each has its own result, and a refused one changes nothing
// of its own.
func Apply(tx kvstore.Tx, ops []*command.LockOp, now int64, index uint64) []*command.LockResult {
	out := make([]*command.LockResult, len(ops))
	for i, op := range ops {
		r := &command.LockResult{Kind: op.Kind, Name: op.Name, AtUs: now}
		switch op.Kind {
		case command.LockOp_ACQUIRE:
			applyAcquire(tx, op, now, index, r)
		case command.LockOp_RENEW:
			applyRenew(tx, op, now, index, r)
		case command.LockOp_RELEASE:
			applyRelease(tx, op, now, r)
		case command.LockOp_GET:
			r.Ok = true
			r.Holders = held(tx, op.Name, now)
		}
		out[i] = r
	}
	return out
}

// applyAcquire takes the owner's own live permit (already), else the first slot
// that is free or expired by now, else answers held with the holders.
func applyAcquire(tx kvstore.Tx, op *command.LockOp, now int64, index uint64, r *command.LockResult) {
	limit := max(op.Limit, 1)
	slots := slotRows(tx, op.Name, limit, now)
	if op.Owner != "" {
		for slot := uint32(0); slot < limit; slot++ {
			if row := slots[slot]; row != nil {
				if o, ok := ownerOf(row); ok && o == op.Owner {
					grant(r, slot, row, true)
					return
				}
			}
		}
	}
	for slot := uint32(0); slot < limit; slot++ {
		if slots[slot] != nil {
			continue
		}
		res := kvstore.Apply(tx, &command.KVOp{Kind: command.KVOp_PUT_IF_ABSENT, Ns: Namespace, Key: Key(op.Name, slot),
			Value: value(op.Owner), TtlSeconds: op.TtlSeconds}, now, index)
		if !res.Applied { // cannot happen: the slot was read free in this same entry
			panic("locks: a free slot refused its permit")
		}
		grant(r, slot, &command.KVRow{Version: res.Version, CreatedUs: now, ExpiresUs: res.ExpiresUs, Value: res.Value}, false)
		return
	}
	r.Reason = command.LockResult_HELD
	for slot := uint32(0); slot < limit; slot++ {
		if row := slots[slot]; row != nil {
			r.Holders = append(r.Holders, holder(slot, row))
		}
	}
}

func grant(r *command.LockResult, slot uint32, row *command.KVRow, already bool) {
	r.Ok, r.Slot, r.Token, r.Already = true, slot, row.Version, already
	r.Owner, _ = ownerOf(row)
	r.SinceUs, r.ExpiresUs = row.CreatedUs, row.ExpiresUs
}

// applyRenew rewrites the permit with a new lifetime, and so a new token, when
// the token is the slot's live one, or the slot's live permit is this
// owner's (its own earlier renew landed; the answer was lost).
func applyRenew(tx kvstore.Tx, op *command.LockOp, now int64, index uint64, r *command.LockResult) {
	r.Slot = op.Slot
	row := permit(tx, op.Name, op.Slot, now)
	if row == nil {
		r.Reason = command.LockResult_LOST
		return
	}
	owner, hasOwner := ownerOf(row)
	mine := op.Owner != "" && hasOwner && owner == op.Owner
	if row.Version != op.Token && !mine {
		r.Reason = command.LockResult_LOST
		r.Holders = []*command.LockHolder{holder(op.Slot, row)}
		return
	}
	res := kvstore.Apply(tx, &command.KVOp{Kind: command.KVOp_PUT, Ns: Namespace, Key: Key(op.Name, op.Slot),
		Value: row.Value, TtlSeconds: op.TtlSeconds, HasExpect: true, Expect: row.Version}, now, index)
	if !res.Applied {
		panic("locks: a live permit refused its renewal")
	}
	r.Ok, r.Token, r.Owner = true, res.Version, owner
	r.SinceUs, r.ExpiresUs = row.CreatedUs, res.ExpiresUs
}

// applyRelease deletes the permit when the token is the slot's live one.
func applyRelease(tx kvstore.Tx, op *command.LockOp, now int64, r *command.LockResult) {
	r.Slot = op.Slot
	row := permit(tx, op.Name, op.Slot, now)
	if row == nil || row.Version != op.Token {
		r.Reason = command.LockResult_LOST
		if row != nil {
			r.Holders = []*command.LockHolder{holder(op.Slot, row)}
		}
		return
	}
	res := kvstore.Apply(tx, &command.KVOp{Kind: command.KVOp_DELETE, Ns: Namespace, Key: Key(op.Name, op.Slot),
		HasExpect: true, Expect: op.Token}, now, 0)
	if !res.Applied {
		panic("locks: a live permit refused its release")
	}
	r.Ok, r.Token = true, op.Token
	r.Owner, _ = ownerOf(row)
}

// permit is the live row of one slot at now, nil when it is free.
func permit(r store.Reader, name string, slot uint32, now int64) *command.KVRow {
	res := kvstore.Read(r, &command.KVOp{Kind: command.KVOp_GET_MANY, Ns: Namespace, Keys: []string{Key(name, slot)}}, now)
	if len(res.Rows) == 0 {
		return nil
	}
	return res.Rows[0]
}

// slotRows reads slots 0..limit-1 at now: the live row of each, nil for a
// free one.
func slotRows(r store.Reader, name string, limit uint32, now int64) []*command.KVRow {
	keys := make([]string, limit)
	for s := range keys {
		keys[s] = Key(name, uint32(s))
	}
	res := kvstore.Read(r, &command.KVOp{Kind: command.KVOp_GET_MANY, Ns: Namespace, Keys: keys}, now)
	out := make([]*command.KVRow, limit)
	for _, row := range res.Rows {
		if s, ok := SlotOf(name, row.Key); ok && s < limit {
			out[s] = row
		}
	}
	return out
}

// held lists every live permit of name at now, by slot, whatever the limit
// its holders passed.
func held(r store.Reader, name string, now int64) []*command.LockHolder {
	var out []*command.LockHolder
	after := ""
	for {
		res := kvstore.Read(r, &command.KVOp{Kind: command.KVOp_GET_PREFIX, Ns: Namespace, Prefix: name + string(Sep),
			After: after, Limit: kvstore.MaxPrefixLimit}, now)
		for _, row := range res.Rows {
			if s, ok := SlotOf(name, row.Key); ok {
				out = append(out, holder(s, row))
			}
		}
		if !res.Truncated {
			break
		}
		after = res.NextAfter
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}
