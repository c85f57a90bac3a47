package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/kvstore"
)

// KV limits (spec §4.7, addendum §4.10).
const (
	maxKVValueBytes = 64 << 10
	maxKVKeyBytes   = 512
	maxKVOpsPerCall = 256
	maxKVKeysPerOp  = 1024
)

var kvNamespace = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

var kvKinds = map[string]fsmpb.KVOp_Kind{
	"get": fsmpb.KVOp_GET, "getMany": fsmpb.KVOp_GET_MANY, "getPrefix": fsmpb.KVOp_GET_PREFIX,
	"put": fsmpb.KVOp_PUT, "putIfAbsent": fsmpb.KVOp_PUT_IF_ABSENT, "cas": fsmpb.KVOp_CAS,
	"delete": fsmpb.KVOp_DELETE, "incr": fsmpb.KVOp_INCR, "check": fsmpb.KVOp_CHECK,
}

func kvBad(reason, detail string) error {
	return &badRequest{status: http.StatusBadRequest, msg: "kv_bad_request", reason: reason, detail: detail}
}

// needsExpiry: writes that create or replace a value must say when it goes.
func needsExpiry(k fsmpb.KVOp_Kind) bool {
	switch k {
	case fsmpb.KVOp_PUT, fsmpb.KVOp_PUT_IF_ABSENT, fsmpb.KVOp_CAS, fsmpb.KVOp_INCR:
		return true
	}
	return false
}

// parseKVOp validates one KV op object. inTxn refuses getPrefix.
func parseKVOp(i int, o object, inTxn bool) (*fsmpb.KVOp, error) {
	at := fmt.Sprintf("op at index %d: ", i)
	name, ok := str(o["op"])
	if !ok {
		return nil, kvBad("kv_bad_op", at+"op must be a string")
	}
	kind, ok := kvKinds[name]
	if !ok {
		return nil, kvBad("kv_bad_op", at+"unknown op "+name)
	}
	if inTxn && kind == fsmpb.KVOp_GET_PREFIX {
		return nil, kvBad("kv_bad_op", at+"getPrefix is not allowed in a transaction")
	}
	op := &fsmpb.KVOp{Kind: kind}
	ns, ok := str(o["ns"])
	if !ok || !kvNamespace.MatchString(ns) {
		return nil, kvBad("kv_bad_namespace", at+"ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	op.Ns = ns
	switch kind {
	case fsmpb.KVOp_GET_MANY:
		elems, ok := array(o["keys"])
		if !ok || len(elems) == 0 {
			return nil, kvBad("kv_bad_key", at+"keys must be a non-empty array of strings")
		}
		if len(elems) > maxKVKeysPerOp {
			return nil, kvBad("kv_too_many_keys", at+fmt.Sprintf("at most %d keys", maxKVKeysPerOp))
		}
		for _, e := range elems {
			k, ok := str(e)
			if !ok || k == "" || len(k) > maxKVKeyBytes {
				return nil, kvBad("kv_bad_key", at+"keys must be non-empty strings of at most 512 bytes")
			}
			op.Keys = append(op.Keys, k)
		}
	case fsmpb.KVOp_GET_PREFIX:
		p, ok := str(o["prefix"])
		if !ok || p == "" {
			return nil, kvBad("kv_bad_prefix", at+"prefix must be a non-empty string")
		}
		op.Prefix = p
		if raw := o["limit"]; present(raw) {
			l, ok := integer(raw)
			if !ok {
				return nil, kvBad("kv_bad_limit", at+"limit must be an integer")
			}
			op.Limit = uint32(max(0, min(l, kvstore.MaxPrefixLimit)))
		}
		if raw := o["after"]; present(raw) {
			if op.After, ok = str(raw); !ok {
				return nil, kvBad("kv_bad_after", at+"after must be a string")
			}
		}
		if raw := o["keysOnly"]; present(raw) {
			if op.KeysOnly, ok = boolean(raw); !ok {
				return nil, kvBad("kv_bad_request", at+"keysOnly must be a boolean")
			}
		}
	default:
		k, ok := str(o["key"])
		if !ok || k == "" || len(k) > maxKVKeyBytes {
			return nil, kvBad("kv_bad_key", at+"key must be a non-empty string of at most 512 bytes")
		}
		op.Key = k
	}
	switch kind {
	case fsmpb.KVOp_PUT, fsmpb.KVOp_PUT_IF_ABSENT, fsmpb.KVOp_CAS:
		v, ok := o["value"]
		if !ok {
			return nil, kvBad("kv_bad_value", at+"value is required (null is a value)")
		}
		if len(v) > maxKVValueBytes {
			return nil, &badRequest{status: http.StatusRequestEntityTooLarge, msg: "kv_value_too_large",
				reason: "kv_value_too_large", detail: at + fmt.Sprintf("value is larger than %d bytes", maxKVValueBytes)}
		}
		op.Value = []byte(v)
	case fsmpb.KVOp_INCR:
		op.Delta = 1
		if raw := o["delta"]; present(raw) {
			d, ok := integer(raw)
			if !ok {
				return nil, kvBad("kv_bad_delta", at+"delta must be an integer")
			}
			op.Delta = d
		}
		if raw := o["min"]; present(raw) {
			if op.Min, ok = integer(raw); !ok {
				return nil, kvBad("kv_bad_limit", at+"min must be an integer")
			}
			op.HasMin = true
		}
		if raw := o["max"]; present(raw) {
			if op.Max, ok = integer(raw); !ok {
				return nil, kvBad("kv_bad_limit", at+"max must be an integer")
			}
			op.HasMax = true
		}
	}
	if raw := o["expect"]; present(raw) {
		e, ok := integer(raw)
		if !ok || e < 0 {
			return nil, kvBad("kv_bad_expect", at+"expect must be an integer >= 0")
		}
		op.Expect, op.HasExpect = uint64(e), true
	}
	switch {
	case kind == fsmpb.KVOp_PUT_IF_ABSENT && op.HasExpect && op.Expect != 0:
		return nil, kvBad("kv_bad_expect", at+"putIfAbsent takes no expect other than 0")
	case (kind == fsmpb.KVOp_CAS || kind == fsmpb.KVOp_CHECK) && !op.HasExpect:
		return nil, kvBad("kv_bad_expect", at+name+" needs expect")
	}
	if raw := o["required"]; present(raw) {
		if op.Required, ok = boolean(raw); !ok {
			return nil, kvBad("kv_bad_request", at+"required must be a boolean")
		}
	}
	ttlRaw, hasTTL := o["ttlSeconds"], present(o["ttlSeconds"])
	forever := false
	if raw := o["forever"]; present(raw) {
		if forever, ok = boolean(raw); !ok {
			return nil, kvBad("kv_bad_request", at+"forever must be a boolean")
		}
	}
	if needsExpiry(kind) {
		if hasTTL == forever {
			return nil, kvBad("kv_expiry_not_specified", at+"a write needs exactly one of ttlSeconds (an integer > 0) or forever: true")
		}
		if hasTTL {
			t, ok := integer(ttlRaw)
			if !ok || t <= 0 {
				return nil, kvBad("kv_expiry_not_specified", at+"ttlSeconds must be an integer > 0")
			}
			if t > maxSeconds {
				return nil, kvBad("kv_bad_ttl", at+"ttlSeconds is too large (use forever: true)")
			}
			op.TtlSeconds = t
		}
		op.Forever = forever
	}
	return op, nil
}

// parseKVOps validates a call's ops: at most 256, one write per key.
func parseKVOps(raws []json.RawMessage, inTxn bool) ([]*fsmpb.KVOp, error) {
	if len(raws) > maxKVOpsPerCall {
		return nil, kvBad("kv_too_many_ops", fmt.Sprintf("at most %d ops per call", maxKVOpsPerCall))
	}
	ops := make([]*fsmpb.KVOp, 0, len(raws))
	written := map[string]bool{}
	for i, raw := range raws {
		o, ok := asObject(raw)
		if !ok {
			return nil, kvBad("kv_bad_op", fmt.Sprintf("op at index %d: must be an object", i))
		}
		op, err := parseKVOp(i, o, inTxn)
		if err != nil {
			return nil, err
		}
		if kvstore.IsWrite(op.Kind) {
			k := op.Ns + "\x00" + op.Key
			if written[k] {
				return nil, kvBad("kv_duplicate_key_in_call", fmt.Sprintf("op at index %d: a second write to %s/%s in one call", i, op.Ns, op.Key))
			}
			written[k] = true
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// kvResultOut shapes one KV result (spec §4.7).
func kvResultOut(r *fsmpb.KVResult) map[string]any {
	out := map[string]any{}
	switch r.Op {
	case "get":
		out["found"] = r.Found
		out["key"] = r.Key
		if r.Found {
			out["value"] = json.RawMessage(r.Value)
			out["version"] = r.Version
			out["expiresAt"] = expiresOut(r.ExpiresUs)
			out["updatedAt"] = isoMillis(r.UpdatedUs)
		}
	case "getMany", "getPrefix":
		rows := make([]map[string]any, 0, len(r.Rows))
		for _, row := range r.Rows {
			m := map[string]any{"key": row.Key, "version": row.Version,
				"expiresAt": expiresOut(row.ExpiresUs), "updatedAt": isoMillis(row.UpdatedUs)}
			if row.Value != nil {
				m["value"] = json.RawMessage(row.Value)
			}
			rows = append(rows, m)
		}
		out["rows"] = rows
		out["truncated"] = r.Truncated
		if r.Op == "getMany" {
			missing := r.Missing
			if missing == nil {
				missing = []string{}
			}
			out["missing"] = missing
		} else if r.NextAfter != "" {
			out["nextAfter"] = r.NextAfter
		} else {
			out["nextAfter"] = nil
		}
	default:
		out["applied"] = r.Applied
		out["op"] = r.Op
		out["key"] = r.Key
		if r.HasValue {
			out["value"] = json.RawMessage(r.Value)
		} else {
			out["value"] = nil
		}
		out["version"] = r.Version
		if r.Reason != "" {
			out["reason"] = r.Reason
		}
		if r.HasValue && r.Applied {
			out["expiresAt"] = expiresOut(r.ExpiresUs)
		}
	}
	return out
}

func expiresOut(us int64) *string {
	if us == 0 {
		return nil
	}
	s := isoMillis(us)
	return &s
}
