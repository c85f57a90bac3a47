package request

import (
	"fmt"
	"regexp"

	"github.com/queen-node/queen-node/command"
)

// KVOp is one KV op as a front end decoded it (spec §4.7). The Has fields
// say whether an optional member was sent.
type KVOp struct {
	Op       string // wire name: get, getMany, getPrefix, put, putIfAbsent, cas, delete, incr, check
	Ns       string
	Key      string
	Keys     []string // getMany
	HasKeys  bool
	Prefix   string // getPrefix
	After    string
	Limit    int64
	KeysOnly bool

	Value     []byte // JSON text (null is a value)
	HasValue  bool
	TTL       int64 // ttlSeconds
	HasTTL    bool
	Forever   bool
	Expect    int64
	HasExpect bool
	Delta     int64
	HasDelta  bool
	Min, Max  int64
	HasMin    bool
	HasMax    bool
	Required  bool
}

var kvNamespace = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// kvKinds are the op names of the API.
var kvKinds = map[string]command.KVOp_Kind{
	"get": command.KVOp_GET, "getMany": command.KVOp_GET_MANY, "getPrefix": command.KVOp_GET_PREFIX,
	"put": command.KVOp_PUT, "putIfAbsent": command.KVOp_PUT_IF_ABSENT, "cas": command.KVOp_CAS,
	"delete": command.KVOp_DELETE, "incr": command.KVOp_INCR, "check": command.KVOp_CHECK,
}

var kvNames = func() map[command.KVOp_Kind]string {
	m := map[command.KVOp_Kind]string{}
	for name, k := range kvKinds {
		m[k] = name
	}
	return m
}()

// KVOpName is an op kind's name in the API.
func KVOpName(k command.KVOp_Kind) string { return kvNames[k] }

// KVBatch validates POST /api/v1/kv: at least one op.
func KVBatch(ops []KVOp) ([]*command.KVOp, error) {
	if len(ops) == 0 {
		return nil, KVBad("kv_bad_request", "operations must not be empty")
	}
	return KVOps(ops, false)
}

// KVOps validates a call's ops: at most 256, one write per key; inTxn (a
// transaction's kv array) refuses getPrefix.
func KVOps(in []KVOp, inTxn bool) ([]*command.KVOp, error) {
	if len(in) > MaxKVOpsPerCall {
		return nil, KVBad("kv_too_many_ops", fmt.Sprintf("at most %d ops per call", MaxKVOpsPerCall))
	}
	ops := make([]*command.KVOp, 0, len(in))
	written := map[string]bool{}
	for i := range in {
		op, err := kvOp(i, &in[i], inTxn)
		if err != nil {
			return nil, err
		}
		if op.Kind.IsWrite() {
			k := op.Ns + "\x00" + op.Key
			if written[k] {
				return nil, KVBad("kv_duplicate_key_in_call", fmt.Sprintf("op at index %d: a second write to %s/%s in one call", i, op.Ns, op.Key))
			}
			written[k] = true
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// OpAt is the "op at index i: " prefix of a KV or timer op's refusal.
func OpAt(i int) string { return fmt.Sprintf("op at index %d: ", i) }

// HasKVWrites reports whether any op can change or gate state: such a call
// is one entry; a call of reads only is a linearizable read.
func HasKVWrites(ops []*command.KVOp) bool {
	for _, op := range ops {
		if op.Kind.Gates() {
			return true
		}
	}
	return false
}

func kvOp(i int, in *KVOp, inTxn bool) (*command.KVOp, error) {
	at := OpAt(i)
	kind, ok := kvKinds[in.Op]
	if !ok {
		return nil, KVBad("kv_bad_op", at+"unknown op "+in.Op)
	}
	if inTxn && kind == command.KVOp_GET_PREFIX { // the error itself names it (addendum §7)
		return nil, &Error{Kind: Invalid, Msg: "getPrefix is not allowed in a transaction", Reason: "kv_bad_op",
			Detail: at + "getPrefix is not allowed in a transaction"}
	}
	if !kvNamespace.MatchString(in.Ns) {
		return nil, KVBad("kv_bad_namespace", at+"ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	op := &command.KVOp{Kind: kind, Ns: in.Ns}
	switch kind {
	case command.KVOp_GET_MANY:
		if len(in.Keys) == 0 {
			return nil, KVBad("kv_bad_key", at+"keys must be a non-empty array of strings")
		}
		if len(in.Keys) > MaxKVKeysPerOp {
			return nil, KVBad("kv_too_many_keys", at+fmt.Sprintf("at most %d keys", MaxKVKeysPerOp))
		}
		for _, k := range in.Keys {
			if k == "" || len(k) > MaxKVKeyBytes {
				return nil, KVBad("kv_bad_key", at+"keys must be non-empty strings of at most 512 bytes")
			}
		}
		op.Keys = in.Keys
	case command.KVOp_GET_PREFIX:
		if in.Prefix == "" {
			return nil, KVBad("kv_prefix_required", at+"getPrefix needs a non-empty prefix")
		}
		op.Prefix, op.After, op.KeysOnly = in.Prefix, in.After, in.KeysOnly
		op.Limit = uint32(max(0, min(in.Limit, MaxPrefixLimit)))
	default:
		if in.Key == "" || len(in.Key) > MaxKVKeyBytes {
			e := KVBad("kv_bad_key", at+"key must be a non-empty string of at most 512 bytes")
			if in.Key != "" {
				e.Code = codeKVKeyTooLarge
			}
			return nil, e
		}
		op.Key = in.Key
	}
	switch kind {
	case command.KVOp_PUT, command.KVOp_PUT_IF_ABSENT, command.KVOp_CAS:
		if !in.HasValue {
			return nil, KVBad("kv_bad_value", at+"value is required (null is a value)")
		}
		if len(in.Value) > MaxKVValueBytes {
			return nil, &Error{Kind: TooLarge, Msg: "kv_value_too_large", Reason: "kv_value_too_large",
				Detail: at + fmt.Sprintf("value is larger than %d bytes", MaxKVValueBytes)}
		}
		op.Value = in.Value
		if op.Value == nil {
			op.Value = []byte("null")
		}
	case command.KVOp_INCR:
		op.Delta = 1
		if in.HasDelta {
			op.Delta = in.Delta
		}
		op.Min, op.HasMin = in.Min, in.HasMin
		op.Max, op.HasMax = in.Max, in.HasMax
	}
	if in.HasExpect && kind == command.KVOp_INCR {
		return nil, KVBad("kv_bad_expect", at+"incr takes min and max, never expect")
	}
	if in.HasExpect {
		if in.Expect < 0 {
			return nil, KVBad("kv_bad_expect", at+"expect must be an integer >= 0")
		}
		op.Expect, op.HasExpect = uint64(in.Expect), true
	}
	switch {
	case kind == command.KVOp_PUT_IF_ABSENT && op.HasExpect && op.Expect != 0:
		return nil, KVBad("kv_bad_expect", at+"putIfAbsent takes no expect other than 0")
	case (kind == command.KVOp_CAS || kind == command.KVOp_CHECK) && !op.HasExpect:
		return nil, KVBad("kv_bad_expect", at+in.Op+" needs expect")
	}
	op.Required = in.Required
	if kind.NeedsExpiry() {
		if in.HasTTL == in.Forever {
			return nil, KVBad("kv_expiry_not_specified", at+"a write needs exactly one of ttlSeconds (an integer > 0) or forever: true")
		}
		if in.HasTTL {
			if in.TTL <= 0 {
				return nil, KVBad("kv_expiry_not_specified", at+"ttlSeconds must be an integer > 0")
			}
			if in.TTL > MaxSeconds {
				return nil, KVBad("kv_bad_ttl", at+"ttlSeconds is too large (use forever: true)")
			}
			op.TtlSeconds = in.TTL
		}
		op.Forever = in.Forever
	}
	return op, nil
}
