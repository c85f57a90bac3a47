package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/queen-node/queen-node/command"

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
		hash, err = f.hashOf(r, meta, stateBuckets(meta))
		return err
	})
	return applied, hash, err
}

// hashOf digests the buckets and every tenant's committed messages.
func (f *FSM) hashOf(r store.Reader, meta *command.MetaRecord, buckets []store.Bucket) (string, error) {
	sum := sha256.New()
	store.Digest(sum, r, buckets)
	for _, key := range tenantKeys(meta) {
		if err := f.queue.Reader(ScopeOf(key).Reader(r)).DigestMessages(sum); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// pinCheck hands OnStateCheck a view of the state as of the state check
// applied at index (the last entry of the batch just applied).
func (f *FSM) pinCheck(index uint64) {
	if f.opts.OnStateCheck == nil {
		return
	}
	view, release, err := f.db.Pin()
	if err != nil {
		f.log.Warn("state check: cannot pin the state", "index", index, "err", err)
		return
	}
	f.opts.OnStateCheck(index, view, release)
}

// CheckDigest digests the state file as view reads it (every bucket, in
// order) for a state check; w sees every byte digested, so the caller can
// bound the rate. Message files are not in it: their records and index
// entries carry checksums of their own (package msgstore).
func CheckDigest(view store.Reader, w io.Writer) string {
	sum := sha256.New()
	buckets := Buckets
	if meta, err := readMeta(view, "state check"); err == nil {
		buckets = stateBuckets(meta)
	}
	store.Digest(io.MultiWriter(sum, w), view, buckets)
	return hex.EncodeToString(sum.Sum(nil))
}
