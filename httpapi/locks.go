package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
	"github.com/queen-node/queen-node/request"
)

// Locks (addendum §4.3): POST /api/v1/locks, {"operations":[...]} or a bare
// array; one entry per call, one result per op, in order. A lock somebody
// else holds is not an error: 200 with acquired:false.

func (a *API) locksPost(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	decoded, err := decodeLocksBody(body)
	var ops []*command.LockOp
	if err == nil {
		ops, err = request.Locks(decoded)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if len(ops) == 0 {
		writeJSON(w, http.StatusOK, map[string]any{"results": []any{}})
		return
	}
	res, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_Locks{Locks: &command.Locks{Ops: ops}}})
	if !ok {
		return
	}
	lr := res.(*command.LocksResult)
	if e := request.LocksVerdict(lr); e != nil {
		writeError(w, e)
		return
	}
	out := make([]map[string]any, len(lr.Results))
	for i, r := range lr.Results {
		out[i] = lockResultOut(i, r)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func decodeLocksBody(body []byte) ([]request.LockOp, error) {
	raws, err := opsOf(body, request.LocksBad("locks_bad_body", `the body is an array of operations, or {"operations":[...]}`))
	if err != nil {
		return nil, err
	}
	return eachOp(raws, func(i int) error { return request.LocksBad("locks_bad_request", request.OpAt(i)+"must be an object") },
		decodeLockOp)
}

// decodeLockOp checks each member's JSON type; a null member is absent.
func decodeLockOp(i int, o object) (request.LockOp, error) {
	at := request.OpAt(i)
	var op request.LockOp
	var ok bool
	if f, has := tenantIn(o); has { // as the KV routes refuse it (addendum §7)
		return op, request.LocksBad("locks_tenant_in_body", at+f+" is not a field of an op: the tenant comes from the connection")
	}
	if raw := o["op"]; present(raw) {
		if op.Op, ok = str(raw); !ok {
			return op, request.LocksBad("locks_unknown_op", at+"op must be a string")
		}
	}
	if raw := o["name"]; present(raw) {
		if op.Name, ok = str(raw); !ok {
			return op, request.LocksBad("locks_bad_name", at+"name must be a string")
		}
		op.HasName = true
	}
	if raw := o["owner"]; present(raw) {
		if op.Owner, ok = str(raw); !ok {
			return op, request.LocksBad("locks_bad_owner", at+"owner must be a string")
		}
		op.HasOwner = true
	}
	_, op.Forever = o["forever"]
	for _, m := range []struct {
		name, reason, msg string
		dst               *int64
		has               *bool
	}{
		{"ttlSeconds", "locks_bad_ttl", "ttlSeconds must be an integer > 0", &op.TTL, &op.HasTTL},
		{"limit", "locks_bad_limit", "limit must be an integer", &op.Limit, &op.HasLimit},
		{"token", "locks_bad_token", "token must be an integer > 0", &op.Token, &op.HasToken},
		{"slot", "locks_bad_slot", "slot must be an integer", &op.Slot, &op.HasSlot},
	} {
		raw := o[m.name]
		if !present(raw) {
			continue
		}
		n, ok := integer(raw)
		if !ok {
			return op, request.LocksBad(m.reason, at+m.msg)
		}
		*m.dst, *m.has = n, true
	}
	return op, nil
}

func lockResultOut(i int, r *command.LockResult) map[string]any {
	out := map[string]any{"index": i, "op": request.LockOpName(r.Kind), "name": r.Name}
	granted := func() {
		out["slot"], out["token"] = r.Slot, r.Token
		out["owner"] = nullable(r.Owner)
		out["guard"] = guardOut(r.Name, r.Slot, r.Token)
		out["since"], out["expiresAt"] = isoMicros(r.SinceUs), isoMicros(r.ExpiresUs)
	}
	refused := func() {
		out["reason"] = lockReason(r.Reason)
		out["holders"] = holdersOut(r.Holders)
	}
	switch r.Kind {
	case command.LockOp_ACQUIRE:
		out["acquired"] = r.Ok
		if !r.Ok {
			refused()
			break
		}
		granted()
		if r.Already {
			out["already"] = true
		}
	case command.LockOp_RENEW:
		out["renewed"] = r.Ok
		if !r.Ok {
			out["slot"] = r.Slot
			refused()
			break
		}
		granted()
		out["renewedAt"] = isoMicros(r.AtUs)
	case command.LockOp_RELEASE:
		out["released"], out["slot"] = r.Ok, r.Slot
		if !r.Ok {
			refused()
			break
		}
		out["releasedAt"] = isoMicros(r.AtUs)
	case command.LockOp_GET:
		out["held"] = len(r.Holders) > 0
		out["holders"] = holdersOut(r.Holders)
	}
	return out
}

func lockReason(r command.LockResult_Reason) string {
	switch r {
	case command.LockResult_HELD:
		return "held"
	case command.LockResult_LOST:
		return "lost"
	}
	return ""
}

// guardOut is the KV check a transaction carries to commit only while the
// permit is still its holder's.
func guardOut(name string, slot uint32, token uint64) map[string]any {
	g := locks.Guard(name, slot, token)
	return map[string]any{"op": "check", "ns": g.Ns, "key": g.Key, "expect": g.Expect, "required": g.Required}
}

func holdersOut(hs []*command.LockHolder) []map[string]any {
	out := make([]map[string]any, len(hs))
	for i, h := range hs {
		m := map[string]any{"slot": h.Slot, "owner": nil, "token": h.Token,
			"since": isoMicros(h.SinceUs), "renewedAt": isoMicros(h.RenewedUs), "expiresAt": nil}
		if h.ExpiresUs != 0 { // a row written by hand may be forever
			m["expiresAt"] = isoMicros(h.ExpiresUs)
		}
		if h.HasOwner {
			m["owner"] = h.Owner
		}
		out[i] = m
	}
	return out
}
