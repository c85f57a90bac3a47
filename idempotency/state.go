package idempotency

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Buckets of the state file this package owns.
var (
	bucketOutcomes = store.Bucket("idempotency") // 'k' key → StoredOutcome
	bucketExpiry   = store.Bucket("idem_expiry") // expiresUs 'k' key → nil
)

// Buckets lists them, for store.Open.
var Buckets = []store.Bucket{bucketOutcomes, bucketExpiry}

func recordKey(key string) []byte { return append([]byte{'k'}, key...) }

func expiryKey(expiresUs int64, key string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(expiresUs)), recordKey(key)...)
}

// Stored returns the live outcome stored under key at entry time now, or nil.
func Stored(r store.Reader, key string, now int64) *command.StoredOutcome {
	v := r.Get(bucketOutcomes, recordKey(key))
	if v == nil {
		return nil
	}
	o := &command.StoredOutcome{}
	if err := proto.Unmarshal(v, o); err != nil {
		panic("idempotency: stored outcome does not decode: " + err.Error())
	}
	if o.ExpiresUs <= now {
		return nil // expired; the sweep has not collected it yet
	}
	return o
}

// Replay is what apply answers, instead of applying cmd, when its key has
// an outcome already; nil when cmd carries no key or the key is new.
func Replay(r store.Reader, cmd *command.Command, now int64) *command.Replay {
	idem := cmd.GetIdempotency()
	if idem.GetKey() == "" {
		return nil
	}
	if o := Stored(r, idem.Key, now); o != nil {
		return &command.Replay{Outcome: o}
	}
	return nil
}

// Remember stores result as the outcome of cmd under its key, in the batch
// (a refused command's outcome is as definitive as an applied one's), unless
// cmd carries no key or the result is an internal error.
func Remember(b *store.Batch, cmd *command.Command, now int64, result proto.Message) {
	idem := cmd.GetIdempotency()
	if idem.GetKey() == "" {
		return
	}
	if r, isResponse := result.(*command.Response); isResponse && r.InternalError != "" {
		return
	}
	wrapped, err := proto.Marshal(command.Wrap(result))
	if err != nil {
		panic("idempotency: encode outcome: " + err.Error())
	}
	o := &command.StoredOutcome{RequestHash: idem.RequestHash, CreatedUs: now,
		ExpiresUs: now + max(idem.TtlSeconds, 1)*1e6, Result: wrapped}
	v, err := proto.Marshal(o)
	if err != nil {
		panic("idempotency: encode outcome: " + err.Error())
	}
	tx := b.Begin()
	if old := tx.Get(bucketOutcomes, recordKey(idem.Key)); old != nil {
		prev := &command.StoredOutcome{}
		if proto.Unmarshal(old, prev) == nil {
			tx.Delete(bucketExpiry, expiryKey(prev.ExpiresUs, idem.Key))
		}
	}
	tx.Put(bucketOutcomes, recordKey(idem.Key), v)
	tx.Put(bucketExpiry, expiryKey(o.ExpiresUs, idem.Key), nil)
	if err := tx.Commit(); err != nil {
		panic("idempotency: store outcome: " + err.Error())
	}
}

// Tx is the part of a command's staged transaction Sweep needs.
type Tx interface {
	store.Reader
	Delete(b store.Bucket, key []byte)
}

// Sweep drops up to limit outcomes that expired by entry time now, and
// reports how many it dropped and whether more are due.
func Sweep(tx Tx, now int64, limit int) (int, bool) {
	var due [][]byte
	cur := tx.Cursor(bucketExpiry)
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if len(k) < 8 || int64(binary.BigEndian.Uint64(k)) > now {
			break
		}
		if len(due) == limit {
			return drop(tx, due), true
		}
		due = append(due, append([]byte(nil), k...))
	}
	return drop(tx, due), false
}

func drop(tx Tx, due [][]byte) int {
	for _, k := range due {
		tx.Delete(bucketExpiry, k)
		tx.Delete(bucketOutcomes, k[8:])
	}
	return len(due)
}

// Due reports whether a sweep at now would drop anything.
func Due(r store.Reader, now int64) bool {
	k, _ := r.Cursor(bucketExpiry).First()
	return len(k) >= 8 && int64(binary.BigEndian.Uint64(k)) <= now
}
