package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/queen-node/queen-node/msgstore"
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
	for _, b := range buckets {
		c := r.Cursor(b)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			fmt.Fprintf(sum, "%s|%x|%x\n", b, k, v)
		}
	}
	for _, p := range f.queue.Reader(r).Committed() {
		var merr error
		err := f.msgs.EachEntry(p.PID, p.FirstSeq, p.NextSeq, func(seq uint64, e msgstore.Entry) bool {
			m, err := f.msgs.Message(p.PID, seq)
			if err != nil {
				merr = fmt.Errorf("message %x/%d: %w", p.PID, seq, err)
				return false
			}
			fmt.Fprintf(sum, "m|%x|%d|%+v|%x|%s|%s|%s|%s\n", p.PID, seq, e, m.ID, m.TxnID, m.TraceID, m.ProducerSub, m.Payload)
			return true
		})
		if err == nil {
			err = merr
		}
		if err != nil {
			return "", fmt.Errorf("entries of %x: %w", p.PID, err)
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}
