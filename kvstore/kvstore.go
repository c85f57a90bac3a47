package kvstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Buckets owned by the KV store.
var (
	BucketEntries = store.Bucket("kv")        // ns 0 key → KVRow (key left empty)
	BucketExpiry  = store.Bucket("kv_expiry") // expiresUs ns 0 key → nil
)

// Limits.
const (
	DefaultPrefixLimit = 100
	MaxPrefixLimit     = 1000
)

// Tx is the staged transaction of a command.
type Tx interface {
	store.Reader
	Put(b store.Bucket, key, value []byte)
	Delete(b store.Bucket, key []byte)
}

func entryKey(ns, key string) []byte {
	k := make([]byte, 0, len(ns)+1+len(key))
	k = append(k, ns...)
	k = append(k, 0)
	return append(k, key...)
}

func expiryKey(expiresUs int64, ns, key string) []byte {
	k := make([]byte, 8, 8+len(ns)+1+len(key))
	binary.BigEndian.PutUint64(k, uint64(expiresUs))
	return append(k, entryKey(ns, key)...)
}

// lookup returns the live entry, or nil when absent or expired at now.
func lookup(r store.Reader, ns, key string, now int64) *command.KVRow {
	v := r.Get(BucketEntries, entryKey(ns, key))
	if v == nil {
		return nil
	}
	row := &command.KVRow{}
	if err := proto.Unmarshal(v, row); err != nil {
		panic("kvstore: stored entry does not decode: " + err.Error())
	}
	if row.ExpiresUs != 0 && row.ExpiresUs <= now {
		return nil
	}
	row.Key = key
	return row
}

// Read answers get, getMany and getPrefix at time now.
func Read(r store.Reader, op *command.KVOp, now int64) *command.KVResult {
	res := &command.KVResult{Kind: op.Kind, Key: op.Key}
	switch op.Kind {
	case command.KVOp_GET:
		if row := lookup(r, op.Ns, op.Key, now); row != nil {
			fill(res, row)
			res.Found = true
		}
	case command.KVOp_GET_MANY:
		res.Key = ""
		for _, k := range op.Keys {
			if row := lookup(r, op.Ns, k, now); row != nil {
				res.Rows = append(res.Rows, row)
			} else {
				res.Missing = append(res.Missing, k)
			}
		}
	case command.KVOp_GET_PREFIX:
		res.Key = ""
		limit := int(op.Limit)
		if limit <= 0 {
			limit = DefaultPrefixLimit
		}
		limit = min(limit, MaxPrefixLimit)
		pfx := entryKey(op.Ns, op.Prefix)
		start := pfx
		if op.After != "" {
			start = append(entryKey(op.Ns, op.After), 0) // exclusive
			if bytes.Compare(start, pfx) < 0 {
				start = pfx
			}
		}
		c := r.Cursor(BucketEntries)
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			row := &command.KVRow{}
			if err := proto.Unmarshal(v, row); err != nil {
				panic("kvstore: stored entry does not decode: " + err.Error())
			}
			if row.ExpiresUs != 0 && row.ExpiresUs <= now {
				continue
			}
			if len(res.Rows) == limit {
				res.Truncated = true
				break
			}
			row.Key = string(k[len(op.Ns)+1:])
			if op.KeysOnly {
				row.Value = nil
			}
			res.Rows = append(res.Rows, row)
		}
		if res.Truncated && len(res.Rows) > 0 {
			res.NextAfter = res.Rows[len(res.Rows)-1].Key
		}
	}
	return res
}

func fill(res *command.KVResult, row *command.KVRow) {
	res.Value, res.HasValue = row.Value, true
	res.Version, res.ExpiresUs, res.UpdatedUs = row.Version, row.ExpiresUs, row.UpdatedUs
}

// Apply runs one op of a command at entry time now; version is the entry's
// index. Reads see the command's earlier writes.
func Apply(tx Tx, op *command.KVOp, now int64, version uint64) *command.KVResult {
	if !op.Kind.Gates() {
		return Read(tx, op, now)
	}
	res := &command.KVResult{Kind: op.Kind, Key: op.Key}
	cur := lookup(tx, op.Ns, op.Key, now)
	refuse := func(reason command.KVResult_Reason) *command.KVResult {
		res.Reason = reason
		if cur != nil {
			fill(res, cur)
		}
		return res
	}
	// Preconditions: expect 0 = must not exist; expect N = version must be N.
	expect, hasExpect := op.Expect, op.HasExpect
	if op.Kind == command.KVOp_PUT_IF_ABSENT {
		expect, hasExpect = 0, true
	}
	if hasExpect {
		switch {
		case expect == 0 && cur != nil:
			return refuse(command.KVResult_EXISTS)
		case expect != 0 && cur == nil:
			return refuse(command.KVResult_ABSENT)
		case expect != 0 && cur.Version != expect:
			return refuse(command.KVResult_VERSION)
		}
	}
	switch op.Kind {
	case command.KVOp_CHECK:
		res.Applied = true
		if cur != nil {
			res.Version = cur.Version
		}
		return res
	case command.KVOp_DELETE:
		if cur == nil {
			return refuse(command.KVResult_ABSENT)
		}
		remove(tx, op.Ns, op.Key)
		res.Applied, res.Version = true, cur.Version
		return res
	case command.KVOp_INCR:
		var base int64
		expires := expiry(op, now)
		if cur != nil {
			n, ok := asInt(cur.Value)
			if !ok {
				return refuse(command.KVResult_TYPE)
			}
			base, expires = n, cur.ExpiresUs // the TTL applies only on create
		}
		next, overflow := addInt(base, op.Delta)
		if overflow || (op.HasMin && next < op.Min) || (op.HasMax && next > op.Max) {
			return refuse(command.KVResult_LIMIT)
		}
		row := write(tx, op.Ns, op.Key, []byte(strconv.FormatInt(next, 10)), expires, now, version, cur)
		res.Applied = true
		fill(res, row)
		return res
	default: // put, putIfAbsent, cas
		row := write(tx, op.Ns, op.Key, op.Value, expiry(op, now), now, version, cur)
		res.Applied = true
		fill(res, row)
		return res
	}
}

func expiry(op *command.KVOp, now int64) int64 {
	if op.Forever || op.TtlSeconds <= 0 {
		return 0
	}
	return now + op.TtlSeconds*1e6
}

func write(tx Tx, ns, key string, value []byte, expiresUs, now int64, version uint64, cur *command.KVRow) *command.KVRow {
	ek := entryKey(ns, key)
	created := now
	if old := tx.Get(BucketEntries, ek); old != nil {
		prev := &command.KVRow{}
		if err := proto.Unmarshal(old, prev); err == nil {
			if prev.ExpiresUs != 0 {
				tx.Delete(BucketExpiry, expiryKey(prev.ExpiresUs, ns, key))
			}
			if cur != nil {
				created = prev.CreatedUs
			}
		}
	}
	if value == nil {
		value = []byte("null")
	}
	row := &command.KVRow{Value: value, Version: version, ExpiresUs: expiresUs, UpdatedUs: now, CreatedUs: created}
	b, err := proto.Marshal(row)
	if err != nil {
		panic("kvstore: " + err.Error())
	}
	tx.Put(BucketEntries, ek, b)
	if expiresUs != 0 {
		tx.Put(BucketExpiry, expiryKey(expiresUs, ns, key), nil)
	}
	row.Key = key
	return row
}

func remove(tx Tx, ns, key string) {
	ek := entryKey(ns, key)
	if old := tx.Get(BucketEntries, ek); old != nil {
		prev := &command.KVRow{}
		if err := proto.Unmarshal(old, prev); err == nil && prev.ExpiresUs != 0 {
			tx.Delete(BucketExpiry, expiryKey(prev.ExpiresUs, ns, key))
		}
	}
	tx.Delete(BucketEntries, ek)
}

// asInt reads a stored JSON value as an integer counter.
func asInt(v []byte) (int64, bool) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, true
	}
	return s, false
}

// Sweep removes up to limit entries that expired at or before now. It
// reports how many it removed and whether more are due.
func Sweep(tx Tx, now int64, limit int) (int, bool) {
	var due [][]byte
	c := tx.Cursor(BucketExpiry)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if int64(binary.BigEndian.Uint64(k[:8])) > now {
			break
		}
		if len(due) == limit {
			return sweepKeys(tx, due, now), true
		}
		due = append(due, append([]byte(nil), k...))
	}
	return sweepKeys(tx, due, now), false
}

func sweepKeys(tx Tx, due [][]byte, now int64) int {
	for _, k := range due {
		tx.Delete(BucketExpiry, k)
		ek := k[8:]
		if v := tx.Get(BucketEntries, ek); v != nil {
			row := &command.KVRow{}
			if err := proto.Unmarshal(v, row); err == nil && row.ExpiresUs != 0 && row.ExpiresUs <= now {
				tx.Delete(BucketEntries, ek)
			}
		}
	}
	return len(due)
}

// HasDue reports whether a sweep at now would remove anything.
func HasDue(r store.Reader, now int64) bool {
	k, _ := r.Cursor(BucketExpiry).First()
	return k != nil && int64(binary.BigEndian.Uint64(k[:8])) <= now
}
