package fsm

import (
	"bytes"

	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/store"
)

const defaultSweepLimit = 1000

// applySweep collects, in bounded steps, what entry time has made dead:
// expired leases, expired KV entries and idempotency records, and the data
// of deleted queues. Every candidate is re-checked here, so a sweep proposed
// late or twice changes nothing it should not.
func applySweep(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	limit := int(cmd.GetSweep().Limit)
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	res := &command.SweepResult{}
	n, more := c.sweepLeases(limit)
	res.Leases, res.More = uint32(n), more
	n, more = kvstore.Sweep(c.tx, c.now, limit)
	res.Kv, res.More = uint32(n), res.More || more
	n, more = idempotency.Sweep(c.tx, c.now, limit)
	res.Idempotency, res.More = uint32(n), res.More || more
	n, more = c.sweepGraveyard(limit)
	res.Messages, res.More = uint32(n), res.More || more
	return res, true
}

// sweepLeases drops leases that expired by entry time. Expiry itself needs
// no entry (every check compares with entry time); this keeps the lease
// index and the "processing" counts small.
func (c *applyCtx) sweepLeases(limit int) (int, bool) {
	type dead struct {
		key []byte
		ref leaseRef
		id  string
	}
	var due []dead
	more := false
	cur := c.tx.Cursor(bLeaseIndex)
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			continue
		}
		ref, ok := parseLeaseIndex(k[i+1:], v)
		if !ok || ref.expires > c.now {
			continue
		}
		if len(due) == limit {
			more = true
			break
		}
		due = append(due, dead{key: append([]byte(nil), k...), ref: ref, id: string(k[:i])})
	}
	for _, d := range due {
		c.tx.Delete(bLeaseIndex, d.key)
		cs := c.cursor(d.ref.pid, d.ref.group)
		if l := cs.rec.Lease; l != nil && l.LeaseId == d.id && !leases.Live(l, c.now) {
			cs.rec.Lease = nil
			cs.dirty = true
		}
	}
	return len(due), more
}

// sweepGraveyard purges the data of deleted queues, up to limit keys.
func (c *applyCtx) sweepGraveyard(limit int) (int, bool) {
	removed := 0
	g := c.tx.Cursor(bGraveyard)
	var graves [][]byte
	for k, _ := g.First(); k != nil; k, _ = g.Next() {
		graves = append(graves, append([]byte(nil), k...))
	}
	for _, grave := range graves {
		id := grave[1:]
		var buckets []store.Bucket
		switch grave[0] {
		case gravePartition:
			buckets = []store.Bucket{bMessages, bDedup, bCursors}
		case graveQueue:
			buckets = []store.Bucket{bDLQ}
		}
		done := true
		for _, b := range buckets {
			n, more := c.deletePrefix(b, id, limit-removed)
			removed += n
			if more {
				done = false
				break
			}
		}
		if !done || removed >= limit {
			return removed, true
		}
		c.tx.Delete(bGraveyard, grave)
	}
	return removed, false
}

// deletePrefix deletes up to limit keys starting with pfx from b. Dead
// letters also leave the time index.
func (c *applyCtx) deletePrefix(b store.Bucket, pfx []byte, limit int) (int, bool) {
	var keys [][]byte
	more := false
	cur := c.tx.Cursor(b)
	for k, _ := cur.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = cur.Next() {
		if len(keys) >= limit {
			more = true
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		c.tx.Delete(b, k)
		if bytes.Equal(b, bDLQ) {
			c.tx.Delete(bDLQTime, k[len(pfx):])
		}
	}
	return len(keys), more
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b[:8]) }
