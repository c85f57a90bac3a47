package queen

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// KV is the broker's key-value store (spec §4.7): namespaced JSON values
// with versions and expiries, readable linearizably from any node, and
// writable in the same transaction as acks and pushes (Tx.KV).
type KV struct{ c *Client }

// ttlSeconds turns a TTL into the wire's expiry: whole seconds (rounded
// up), or forever for ttl <= 0.
func ttlSeconds(ttl time.Duration) (secs int64, forever bool) {
	if ttl <= 0 {
		return 0, true
	}
	return int64((ttl + time.Second - 1) / time.Second), false
}

// storesValue: the ops that must say when their value expires.
func storesValue(op string) bool {
	return op == "put" || op == "putIfAbsent" || op == "cas" || op == "incr"
}

func marshalValue(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("queen: kv value: %w", err)
	}
	return b, nil
}

func (k *KV) run(ctx context.Context, ops ...kvOp) (*kvResponse, error) {
	res, err := do(ctx, k.c.retry, func(ctx context.Context) (*kvResponse, error) { return k.c.t.kv(ctx, ops) })
	if err != nil {
		return nil, err
	}
	if res.OK && len(res.Results) != len(ops) {
		return nil, &Error{Message: fmt.Sprintf("kv answered %d results for %d ops", len(res.Results), len(ops))}
	}
	return res, nil
}

// Get reads one key. A missing or expired key is Found=false, not an error.
func (k *KV) Get(ctx context.Context, ns, key string) (*KVEntry, error) {
	res, err := k.run(ctx, kvOp{Op: "get", NS: ns, Key: key})
	if err != nil {
		return nil, err
	}
	r := res.Results[0]
	return &KVEntry{Key: key, Found: r.Found, Value: r.Value, Version: r.Version, ExpiresAt: r.ExpiresAt}, nil
}

// GetMany reads many keys of one namespace at once.
func (k *KV) GetMany(ctx context.Context, ns string, keys ...string) (*KVRows, error) {
	res, err := k.run(ctx, kvOp{Op: "getMany", NS: ns, Keys: keys})
	if err != nil {
		return nil, err
	}
	r := res.Results[0]
	return &KVRows{Rows: r.Rows, Missing: r.Missing, Truncated: r.Truncated}, nil
}

// Put stores value (marshalled as JSON) under key for ttl (<= 0: forever).
func (k *KV) Put(ctx context.Context, ns, key string, value any, ttl time.Duration) (*KVWrite, error) {
	return k.write(ctx, "put", ns, key, value, ttl)
}

// PutIfAbsent stores value only if key does not exist (or has expired);
// otherwise Applied=false with Reason "exists" and the current value.
func (k *KV) PutIfAbsent(ctx context.Context, ns, key string, value any, ttl time.Duration) (*KVWrite, error) {
	return k.write(ctx, "putIfAbsent", ns, key, value, ttl)
}

// Delete removes key; a missing key is Applied=false, Reason "absent".
func (k *KV) Delete(ctx context.Context, ns, key string) (*KVWrite, error) {
	res, err := k.run(ctx, kvOp{Op: "delete", NS: ns, Key: key})
	if err != nil {
		return nil, err
	}
	return writeOf(res.Results[0]), nil
}

// DeleteMany removes keys of one namespace in one call (one log entry, at
// most the broker's ops per call: 256), one result per key in order; a
// missing key is Applied=false, Reason "absent".
func (k *KV) DeleteMany(ctx context.Context, ns string, keys ...string) ([]KVWrite, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ops := make([]kvOp, len(keys))
	for i, key := range keys {
		ops[i] = kvOp{Op: "delete", NS: ns, Key: key}
	}
	res, err := k.run(ctx, ops...)
	if err != nil {
		return nil, err
	}
	out := make([]KVWrite, len(res.Results))
	for i, r := range res.Results {
		out[i] = *writeOf(r)
	}
	return out, nil
}

func (k *KV) write(ctx context.Context, op, ns, key string, value any, ttl time.Duration) (*KVWrite, error) {
	v, err := marshalValue(value)
	if err != nil {
		return nil, err
	}
	res, err := k.run(ctx, kvOp{Op: op, NS: ns, Key: key, Value: v, TTL: ttl})
	if err != nil {
		return nil, err
	}
	return writeOf(res.Results[0]), nil
}

func writeOf(r kvResult) *KVWrite {
	return &KVWrite{Key: r.Key, Applied: r.Applied, Reason: r.Reason, Version: r.Version, Value: r.Value}
}
