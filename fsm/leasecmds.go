package fsm

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
)

// Extend refusal texts (spec §4.6).
const (
	errLeaseNotFound = "Lease not found"
	errLeaseExpired  = "Lease already expired"
)

// applyExtendLease extends every partition lease that carries the leaseId
// (all partitions of a multi-partition pop).
func applyExtendLease(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetExtendLease()
	res := &command.ExtendResult{}
	found := 0
	for _, ref := range c.leaseHolders(in.LeaseId) {
		cs := c.cursor(ref.pid, ref.group)
		l := cs.rec.Lease
		if l == nil || l.LeaseId != in.LeaseId {
			continue
		}
		found++
		if leases.Extend(l, c.now, in.Seconds) {
			cs.dirty = true
			c.tx.Put(bLeaseIndex, leaseIndexKey(l.LeaseId, ref.pid, ref.group), u64(uint64(l.ExpiresUs)))
			res.Success = true
			res.ExpiresUs = max(res.ExpiresUs, l.ExpiresUs)
		}
	}
	switch {
	case found == 0:
		res.Error = errLeaseNotFound
	case !res.Success:
		res.Error = errLeaseExpired
	}
	return res, true
}

type leaseRef struct {
	pid     []byte
	group   string
	expires int64
}

// leaseHolders lists the (partition, group) pairs indexed under leaseID.
func (c *applyCtx) leaseHolders(leaseID string) []leaseRef {
	pfx := prefix(leaseID)
	var out []leaseRef
	cur := c.tx.Cursor(bLeaseIndex)
	for k, v := cur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = cur.Next() {
		if ref, ok := parseLeaseIndex(k[len(pfx):], v); ok {
			out = append(out, ref)
		}
	}
	return out
}

func parseLeaseIndex(rest, v []byte) (leaseRef, bool) {
	if len(rest) < 16 || len(v) != 8 {
		return leaseRef{}, false
	}
	return leaseRef{
		pid:     append([]byte(nil), rest[:16]...),
		group:   string(rest[16:]),
		expires: int64(binary.BigEndian.Uint64(v)),
	}, true
}
