package fsm

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/queen-node/queen-node/store"
)

// StateHash digests the replicated state as of one applied entry: every
// bucket of the state file and every committed message (its index entry
// and its record). Two replicas that applied the same log to the same index
// give the same hash (DESIGN.md invariant 2); an operator compares them
// with GET /api/v1/system/state-hash.
func (f *FSM) StateHash() (applied uint64, hash string, err error) {
	err = f.db.View(func(r store.Reader) error {
		meta, err := readMeta(r, "state file")
		if err != nil {
			return err
		}
		applied = meta.AppliedIndex
		hash, err = f.hashOf(r, Buckets)
		return err
	})
	return applied, hash, err
}

func (f *FSM) hashOf(r store.Reader, buckets []store.Bucket) (string, error) {
	sum := sha256.New()
	store.Digest(sum, r, buckets)
	if err := f.queue.Reader(r).DigestMessages(sum); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}
