package queue

import (
	"bytes"

	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/traces"
)

// SweepGraveyard purges the records of deleted queues, up to limit keys
// (their message files went when the delete committed), and reports how
// many it removed and whether more remain.
func (t *Tx) SweepGraveyard(limit int) (int, bool) {
	removed := 0
	g := t.tx.Cursor(bGraveyard)
	var graves [][]byte
	for k, _ := g.First(); k != nil; k, _ = g.Next() {
		graves = append(graves, append([]byte(nil), k...))
	}
	for _, grave := range graves {
		id := grave[1:]
		var bucket store.Bucket
		switch grave[0] {
		case gravePartition:
			t.dropLeasesOf(id)
			bucket = bCursors
		case graveQueue:
			bucket = bDLQ
		}
		n, more := t.deletePrefix(bucket, id, limit-removed)
		removed += n
		if !more && removed < limit && grave[0] == gravePartition {
			// The partition's tombstones and the traces of its messages.
			n, more = t.deletePrefix(bDeleted, id, limit-removed)
			removed += n
			if !more && removed < limit {
				n, more = t.deletePrefix(bDedupGone, id, limit-removed)
				removed += n
			}
			if !more && removed < limit {
				n, more = traces.RemovePartition(t.tx, id, limit-removed)
				removed += n
			}
		}
		if more || removed >= limit {
			return removed, true
		}
		t.tx.Delete(bGraveyard, grave)
	}
	return removed, false
}

// deletePrefix deletes up to limit keys starting with pfx from b. Dead
// letters also leave the time index.
func (t *Tx) deletePrefix(b store.Bucket, pfx []byte, limit int) (int, bool) {
	var keys [][]byte
	more := false
	cur := t.tx.Cursor(b)
	for k, _ := cur.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = cur.Next() {
		if len(keys) >= limit {
			more = true
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		if bytes.Equal(b, bDLQ) {
			t.dropDeadLetterKey(nil, k) // its time and message index entries too
			continue
		}
		t.tx.Delete(b, k)
	}
	return len(keys), more
}

// GraveyardDue reports whether deleted queues' records wait for a sweep.
func GraveyardDue(r store.Reader) bool {
	k, _ := r.Cursor(bGraveyard).First()
	return k != nil
}
