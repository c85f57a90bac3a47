package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Growth. A group's load is the sum of its tenants' weights; when it
// outgrows one group, its tenants are partitioned over two groups (a split
// by tenant). A tenant is the unit that moves: its buckets and message
// files go to the other group whole (DESIGN.md, "Moving a tenant"). A
// single tenant bigger than a group would need its keys split into ranges,
// as CockroachDB splits ranges; that is out of scope here.

// ErrSingleTenant is Split's answer for a group with fewer than two
// tenants: there is nothing to partition without splitting a tenant.
var ErrSingleTenant = errors.New("placement: group has one tenant; splitting a tenant needs key ranges (out of scope)")

// ErrUnknown is returned for a group or tenant that does not exist.
var ErrUnknown = errors.New("placement: unknown")

// GroupOf is the group carrying tenant, or nil. In the broker this is the
// lookup a front end does in the placement table before proposing.
func (c *Cluster) GroupOf(tenant string) *Group {
	for _, g := range c.groups {
		if _, ok := g.Tenants[tenant]; ok {
			return g
		}
	}
	return nil
}

// AddGroup creates an empty group with the given ID, placed like Place
// places one: R replicas on the best live nodes, led by the replica
// leading the fewest groups.
func (c *Cluster) AddGroup(id int) (*Group, error) {
	if c.Group(id) != nil {
		return nil, fmt.Errorf("placement: group %d exists", id)
	}
	if live := len(c.Live()); live < c.R {
		return nil, fmt.Errorf("placement: %d live nodes cannot hold %d replicas", live, c.R)
	}
	g := &Group{ID: id, Tenants: map[string]int64{}}
	if err := c.fill(g, c.replicaCounts(), c.leaderCounts()); err != nil {
		return nil, err
	}
	c.groups = append(c.groups, g)
	slices.SortFunc(c.groups, func(a, b *Group) int { return cmp.Compare(a.ID, b.ID) })
	return g, nil
}

// MoveTenant moves tenant to the group with ID to: one tenant move, its
// weight in bytes copied. Replicas do not move; only the tenant's data
// changes group.
func (c *Cluster) MoveTenant(tenant string, to int) (Moves, error) {
	src := c.GroupOf(tenant)
	if src == nil {
		return Moves{}, fmt.Errorf("%w tenant %q", ErrUnknown, tenant)
	}
	dst := c.Group(to)
	if dst == nil {
		return Moves{}, fmt.Errorf("%w group %d", ErrUnknown, to)
	}
	if dst == src {
		return Moves{}, nil
	}
	w := src.Tenants[tenant]
	delete(src.Tenants, tenant)
	if dst.Tenants == nil {
		dst.Tenants = map[string]int64{}
	}
	dst.Tenants[tenant] = w
	return Moves{Tenants: 1, Bytes: w}, nil
}

// Split partitions group id's tenants over itself and a new group newID,
// and returns the tenant moves. The partition is greedy (heaviest tenant
// first, each to the lighter half), so the halves differ by at most the
// heaviest tenant's weight; the lighter half is the one that moves,
// because bytes copied are the cost of a split.
func (c *Cluster) Split(id, newID int) (Moves, error) {
	g := c.Group(id)
	if g == nil {
		return Moves{}, fmt.Errorf("%w group %d", ErrUnknown, id)
	}
	if len(g.Tenants) < 2 {
		return Moves{}, ErrSingleTenant
	}
	names := make([]string, 0, len(g.Tenants))
	for t := range g.Tenants {
		names = append(names, t)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(g.Tenants[b], g.Tenants[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var keep, move []string
	var wKeep, wMove int64
	for _, t := range names {
		if wKeep <= wMove {
			keep, wKeep = append(keep, t), wKeep+g.Tenants[t]
		} else {
			move, wMove = append(move, t), wMove+g.Tenants[t]
		}
	}
	if wMove > wKeep || (wMove == wKeep && len(move) > len(keep)) {
		move = keep
	}
	if _, err := c.AddGroup(newID); err != nil {
		return Moves{}, err
	}
	var m Moves
	for _, t := range move {
		mt, err := c.MoveTenant(t, newID)
		if err != nil {
			return m, err
		}
		m.Add(mt)
	}
	return m, nil
}
