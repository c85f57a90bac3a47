package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/tenant"
)

// The placement table (--raft-groups): which Raft group each tenant lives
// in, kept in group 0's state, in a bucket of the log's (no tenant's).
// A row is an operator's pin or a tenant's first write; once a tenant has
// written in a group, its row never moves (moving a tenant is not built:
// cluster/DESIGN.md says what it would take). Both kinds go through group
// 0's log, so a pin and a first write elsewhere are ordered: whichever
// comes second sees the first.

var bPlacements = store.Bucket("placements") // tenant name → PlacementRecord

func applyPlaceTenant(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetPlaceTenant()
	if err := tenant.Valid(in.Tenant); err != nil || in.Tenant == tenant.Default {
		return &command.PlaceTenantResult{Error: fmt.Sprintf("tenant %q cannot be placed: %s (the default tenant lives in group 0)",
			in.Tenant, tenant.Rule)}, true
	}
	rec := &command.PlacementRecord{}
	found := false
	if v := c.tx.Get(bPlacements, []byte(in.Tenant)); v != nil {
		command.MustDecodeRecord(v, rec)
		found = true
	}
	res := &command.PlaceTenantResult{Group: rec.Group, Written: rec.Written}
	switch {
	case found && rec.Written && rec.Group != in.Group && in.Pin:
		res.Error = fmt.Sprintf("tenant %s already has data in group %d: it cannot be pinned to group %d (moving a tenant is not supported)",
			in.Tenant, rec.Group, in.Group)
		return res, true
	case found && rec.Group != in.Group && !in.Pin:
		res.Error = fmt.Sprintf("tenant %s lives in group %d, not %d", in.Tenant, rec.Group, in.Group)
		return res, true
	}
	rec.Group = in.Group
	if in.Pin {
		rec.Pinned, rec.PinnedUs = true, c.now
	} else if !rec.Written {
		rec.Written, rec.FirstWriteUs = true, c.now
	}
	c.tx.Put(bPlacements, []byte(in.Tenant), command.MustEncodeRecord(rec))
	return &command.PlaceTenantResult{Placed: true, Group: rec.Group, Written: rec.Written}, true
}

// Placements is the placement table: tenant name → its row.
func (rd *Reader) Placements() map[string]*command.PlacementRecord {
	out := map[string]*command.PlacementRecord{}
	c := rd.r.Cursor(bPlacements)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rec := &command.PlacementRecord{}
		command.MustDecodeRecord(v, rec)
		out[string(k)] = rec
	}
	return out
}

// Placement is tenant name's row of the placement table, or nil.
func (rd *Reader) Placement(name string) *command.PlacementRecord {
	v := rd.r.Get(bPlacements, []byte(name))
	if v == nil {
		return nil
	}
	rec := &command.PlacementRecord{}
	command.MustDecodeRecord(v, rec)
	return rec
}
