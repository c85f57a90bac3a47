package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/store"
)

// Idempotency keys (seed 003): the first definitive outcome of a request
// that carried an Idempotency-Key is stored under the key, in the same
// entry as the request's own effects, and a retry with the key is answered
// from the store without applying anything. Because it is replicated state,
// a retry after a leader failover finds it too.

func idemKey(key string) []byte { return append([]byte{'k'}, key...) }

// storedOutcome returns the live outcome stored under key, or nil.
func storedOutcome(r store.Reader, key string, now int64) *fsmpb.StoredOutcome {
	v := r.Get(bIdem, idemKey(key))
	if v == nil {
		return nil
	}
	o := &fsmpb.StoredOutcome{}
	mustUnmarshal(v, o)
	if o.ExpiresUs <= now {
		return nil // expired; the sweep has not collected it yet
	}
	return o
}

// storeOutcome writes an outcome under the key, replacing an expired one.
func storeOutcome(b *store.Batch, idem *fsmpb.Idempotency, now int64, o *fsmpb.StoredOutcome) {
	tx := b.Begin()
	if v := tx.Get(bIdem, idemKey(idem.Key)); v != nil {
		old := &fsmpb.StoredOutcome{}
		mustUnmarshal(v, old)
		tx.Delete(bIdemExpiry, append(u64(uint64(old.ExpiresUs)), idemKey(idem.Key)...))
	}
	o.RequestHash = idem.RequestHash
	o.CreatedUs = now
	o.ExpiresUs = now + max(idem.TtlSeconds, 1)*1e6
	tx.Put(bIdem, idemKey(idem.Key), mustMarshal(o))
	tx.Put(bIdemExpiry, append(u64(uint64(o.ExpiresUs)), idemKey(idem.Key)...), nil)
	if err := tx.Commit(); err != nil {
		panic("fsm: store idempotency record: " + err.Error())
	}
}

// applyIdempotencyRecord stores a literal answer (a 4xx the front end gave
// without a command) under the request's key.
func applyIdempotencyRecord(c *applyCtx, cmd *fsmpb.Command) (proto.Message, bool) {
	// Storing happens in applyCommand, like for every command with a key;
	// this command has no other effect.
	return &fsmpb.IdempotencyResult{Stored: true}, true
}
