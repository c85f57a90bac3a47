package grpcapi

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/kvstore"
)

// KV limits, as httpapi/kvparse.go's (spec §4.7).
const (
	maxKVValueBytes = 64 << 10
	maxKVKeyBytes   = 512
	maxKVOpsPerCall = 256
	maxKVKeysPerOp  = 1024
)

var kvNamespace = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

var kvKinds = map[queenpb.KvOpKind]fsmpb.KVOp_Kind{
	queenpb.KvOpKind_KV_OP_KIND_GET: fsmpb.KVOp_GET, queenpb.KvOpKind_KV_OP_KIND_GET_MANY: fsmpb.KVOp_GET_MANY,
	queenpb.KvOpKind_KV_OP_KIND_GET_PREFIX: fsmpb.KVOp_GET_PREFIX, queenpb.KvOpKind_KV_OP_KIND_PUT: fsmpb.KVOp_PUT,
	queenpb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT: fsmpb.KVOp_PUT_IF_ABSENT, queenpb.KvOpKind_KV_OP_KIND_CAS: fsmpb.KVOp_CAS,
	queenpb.KvOpKind_KV_OP_KIND_DELETE: fsmpb.KVOp_DELETE, queenpb.KvOpKind_KV_OP_KIND_INCR: fsmpb.KVOp_INCR,
	queenpb.KvOpKind_KV_OP_KIND_CHECK: fsmpb.KVOp_CHECK,
}

// needsExpiry: writes that create or replace a value must say when it goes.
func needsExpiry(k fsmpb.KVOp_Kind) bool {
	switch k {
	case fsmpb.KVOp_PUT, fsmpb.KVOp_PUT_IF_ABSENT, fsmpb.KVOp_CAS, fsmpb.KVOp_INCR:
		return true
	}
	return false
}

// kvOp validates one KV op. inTxn refuses get_prefix.
func kvOp(i int, in *queenpb.KvOp, inTxn bool) (*fsmpb.KVOp, error) {
	at := fmt.Sprintf("op at index %d: ", i)
	if in == nil {
		return nil, invalidKV("kv_bad_op", at+"must be set")
	}
	kind, ok := kvKinds[in.Op]
	if !ok {
		return nil, invalidKV("kv_bad_op", at+"unknown op "+in.Op.String())
	}
	if inTxn && kind == fsmpb.KVOp_GET_PREFIX {
		return nil, invalidKV("kv_bad_op", at+"getPrefix is not allowed in a transaction")
	}
	if !kvNamespace.MatchString(in.Ns) {
		return nil, invalidKV("kv_bad_namespace", at+"ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	op := &fsmpb.KVOp{Kind: kind, Ns: in.Ns}
	if err := kvTarget(at, in, op); err != nil {
		return nil, err
	}
	switch kind {
	case fsmpb.KVOp_PUT, fsmpb.KVOp_PUT_IF_ABSENT, fsmpb.KVOp_CAS:
		if in.Value == nil {
			return nil, invalidKV("kv_bad_value", at+"value is required (null is a value)")
		}
		if len(in.Value) > maxKVValueBytes {
			return nil, invalidKV("kv_value_too_large", at+fmt.Sprintf("value is larger than %d bytes", maxKVValueBytes))
		}
		v, err := jsonText(at+"value", in.Value)
		if err != nil {
			return nil, invalidKV("kv_bad_value", err.Error())
		}
		op.Value = v
	case fsmpb.KVOp_INCR:
		op.Delta = 1
		if in.Delta != nil {
			op.Delta = *in.Delta
		}
		if in.Min != nil {
			op.Min, op.HasMin = *in.Min, true
		}
		if in.Max != nil {
			op.Max, op.HasMax = *in.Max, true
		}
	}
	if in.Expect != nil {
		if *in.Expect > 1<<63-1 {
			return nil, invalidKV("kv_bad_expect", at+"expect must be an integer >= 0")
		}
		op.Expect, op.HasExpect = *in.Expect, true
	}
	switch {
	case kind == fsmpb.KVOp_PUT_IF_ABSENT && op.HasExpect && op.Expect != 0:
		return nil, invalidKV("kv_bad_expect", at+"putIfAbsent takes no expect other than 0")
	case (kind == fsmpb.KVOp_CAS || kind == fsmpb.KVOp_CHECK) && !op.HasExpect:
		return nil, invalidKV("kv_bad_expect", at+kvstore.OpName(kind)+" needs expect")
	}
	op.Required = in.Required
	if needsExpiry(kind) {
		hasTTL := in.TtlSeconds != 0
		if hasTTL == in.Forever {
			return nil, invalidKV("kv_expiry_not_specified", at+"a write needs exactly one of ttl_seconds (an integer > 0) or forever: true")
		}
		if in.TtlSeconds < 0 {
			return nil, invalidKV("kv_expiry_not_specified", at+"ttl_seconds must be an integer > 0")
		}
		if in.TtlSeconds > maxSeconds {
			return nil, invalidKV("kv_bad_ttl", at+"ttl_seconds is too large (use forever: true)")
		}
		op.TtlSeconds, op.Forever = in.TtlSeconds, in.Forever
	}
	return op, nil
}

// kvTarget validates what an op names: keys, a prefix, or one key.
func kvTarget(at string, in *queenpb.KvOp, op *fsmpb.KVOp) error {
	switch op.Kind {
	case fsmpb.KVOp_GET_MANY:
		if len(in.Keys) == 0 {
			return invalidKV("kv_bad_key", at+"keys must be a non-empty array of strings")
		}
		if len(in.Keys) > maxKVKeysPerOp {
			return invalidKV("kv_too_many_keys", at+fmt.Sprintf("at most %d keys", maxKVKeysPerOp))
		}
		for _, k := range in.Keys {
			if k == "" || len(k) > maxKVKeyBytes {
				return invalidKV("kv_bad_key", at+"keys must be non-empty strings of at most 512 bytes")
			}
		}
		op.Keys = in.Keys
	case fsmpb.KVOp_GET_PREFIX:
		if in.Prefix == "" {
			return invalidKV("kv_bad_prefix", at+"prefix must be a non-empty string")
		}
		op.Prefix, op.After, op.KeysOnly = in.Prefix, in.After, in.KeysOnly
		op.Limit = min(in.Limit, kvstore.MaxPrefixLimit)
	default:
		if in.Key == "" || len(in.Key) > maxKVKeyBytes {
			return invalidKV("kv_bad_key", at+"key must be a non-empty string of at most 512 bytes")
		}
		op.Key = in.Key
	}
	return nil
}

// kvOps validates a call's ops: at most 256, one write per key.
func kvOps(in []*queenpb.KvOp, inTxn bool) ([]*fsmpb.KVOp, error) {
	if len(in) > maxKVOpsPerCall {
		return nil, invalidKV("kv_too_many_ops", fmt.Sprintf("at most %d ops per call", maxKVOpsPerCall))
	}
	ops := make([]*fsmpb.KVOp, 0, len(in))
	written := map[string]bool{}
	for i, raw := range in {
		op, err := kvOp(i, raw, inTxn)
		if err != nil {
			return nil, err
		}
		if kvstore.IsWrite(op.Kind) {
			k := op.Ns + "\x00" + op.Key
			if written[k] {
				return nil, invalidKV("kv_duplicate_key_in_call", fmt.Sprintf("op at index %d: a second write to %s/%s in one call", i, op.Ns, op.Key))
			}
			written[k] = true
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// kvBatch validates POST /kv's equivalent: at least one op.
func kvBatch(in *queenpb.KvRequest) ([]*fsmpb.KVOp, error) {
	if len(in.Operations) == 0 {
		return nil, invalidKV("kv_bad_request", "operations must not be empty")
	}
	return kvOps(in.Operations, false)
}

// transactionRequest validates a transaction (spec §4.5): acks and pushes
// in operations, KV in the root kv array, lease evidence per op or in
// required_leases. An ack op with an unknown status reads as completed (2.x).
func transactionRequest(in *queenpb.TransactionRequest) (*fsmpb.Transaction, error) {
	if len(in.Operations) == 0 && len(in.Kv) == 0 {
		return nil, invalid("operations array cannot be empty")
	}
	out := &fsmpb.Transaction{RequiredLeases: in.RequiredLeases}
	for i, op := range in.Operations {
		at := "operations[" + strconv.Itoa(i) + "]."
		switch o := op.GetOp().(type) {
		case *queenpb.TransactionOp_Ack:
			it, known, err := ackItem(fromAckRequest(o.Ack), false)
			if err != nil {
				return nil, err
			}
			if !known {
				it.Status = fsm.StatusCompleted
			}
			out.Ops = append(out.Ops, &fsmpb.TxnOp{Op: &fsmpb.TxnOp_Ack{Ack: it}})
		case *queenpb.TransactionOp_Push:
			it, err := pushItem(at+"push.", o.Push)
			if err != nil {
				return nil, err
			}
			out.Ops = append(out.Ops, &fsmpb.TxnOp{Op: &fsmpb.TxnOp_Push{Push: it}})
		default:
			return nil, invalid(at + "op must be an ack or a push")
		}
	}
	var err error
	if out.Kv, err = kvOps(in.Kv, true); err != nil {
		return nil, err
	}
	id := uuid.New()
	out.TransactionId = id[:]
	return out, nil
}
