package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// NodeID names a node. Every tie in this package is broken by the smaller
// ID (string order), so zero-pad numbered IDs ("n01", not "n1") if the
// order is meant to be numeric.
type NodeID string

// Node is a machine that can hold replicas.
type Node struct {
	ID NodeID
	// Zone is an optional failure domain (rack, zone). "" means none: a
	// cluster whose nodes have no zones is placed by load alone.
	Zone string
	// Alive is false once the node has been declared dead (by an operator
	// or a timeout, see DESIGN.md), not merely when it stops answering.
	Alive bool
}

// Group is one Raft group: its voters, its leader and the tenants it
// carries.
type Group struct {
	ID int
	// Replicas are the group's voters. A replica on a dead node stays here
	// until a replacement exists: removing it first would shrink the group
	// below R for no gain (and a node that comes back still holds its data).
	Replicas []NodeID
	Leader   NodeID // "" when no quorum of replicas is alive
	// Tenants maps a tenant to its weight (bytes, or 1 per tenant if only
	// counts matter). The group's load is their sum (Weight).
	Tenants map[string]int64
}

// Weight is the group's load: the sum of its tenants' weights.
func (g *Group) Weight() int64 {
	var w int64
	for _, t := range g.Tenants {
		w += t
	}
	return w
}

// Has reports whether id is one of the group's replicas.
func (g *Group) Has(id NodeID) bool { return slices.Contains(g.Replicas, id) }

// Cluster is the placement state: the nodes, the groups and the
// replication factor. In the broker this is what the placement table in
// group 0 would hold.
type Cluster struct {
	R      int
	nodes  []Node   // sorted by ID
	groups []*Group // sorted by ID
}

// Place builds a cluster from nodes and groups, giving every group R
// replicas on distinct live nodes and a leader. The groups' Replicas and
// Leader are ignored and overwritten; their tenants are kept.
//
// Groups are placed one at a time in ID order, each replica on the best
// node by pick: a zone the group does not use yet, then the fewest
// replicas, then the smallest ID. Filling the least-loaded nodes first
// keeps every node's replica count within one of every other's when there
// are no zones (or equal zones): the R least-loaded nodes each gain one.
func Place(groups []Group, nodes []Node, r int) (*Cluster, error) {
	if r < 1 {
		return nil, fmt.Errorf("placement: replication factor %d < 1", r)
	}
	c := &Cluster{R: r, nodes: slices.Clone(nodes)}
	slices.SortFunc(c.nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(c.nodes); i++ {
		if c.nodes[i].ID == c.nodes[i-1].ID {
			return nil, fmt.Errorf("placement: node %s listed twice", c.nodes[i].ID)
		}
	}
	if live := len(c.Live()); live < r {
		return nil, fmt.Errorf("placement: %d live nodes cannot hold %d replicas", live, r)
	}
	for _, g := range groups {
		if c.Group(g.ID) != nil {
			return nil, fmt.Errorf("placement: group %d listed twice", g.ID)
		}
		ng := &Group{ID: g.ID, Tenants: clone(g.Tenants)}
		c.groups = append(c.groups, ng)
	}
	slices.SortFunc(c.groups, func(a, b *Group) int { return cmp.Compare(a.ID, b.ID) })
	counts := c.replicaCounts()
	leaders := c.leaderCounts()
	for _, g := range c.groups {
		if err := c.fill(g, counts, leaders); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fill gives an empty group R replicas and a first leader. The leader is
// the replica leading the fewest groups so far: in a real group it is
// whoever wins the first election and the leader balancer then moves it
// here, so starting balanced only saves the transfers.
func (c *Cluster) fill(g *Group, counts, leaders map[NodeID]int) error {
	for len(g.Replicas) < c.R {
		n := c.pick(g, counts)
		if n == "" {
			return fmt.Errorf("placement: no node for replica %d of group %d", len(g.Replicas)+1, g.ID)
		}
		g.Replicas = append(g.Replicas, n)
		counts[n]++
	}
	g.Leader = leastLed(g.Replicas, leaders)
	leaders[g.Leader]++
	return nil
}

// pick is the node that should hold a new replica of g, or "" if none
// can: alive and not already a replica of g (two replicas on one node
// would count twice towards a quorum that one crash destroys), preferring
// a zone none of g's live replicas is in, then the fewest replicas, then
// the smallest ID. Zone spread comes before load, as in CockroachDB's
// allocator (diversity outranks range count): a group with two replicas
// in one zone loses its quorum with that zone.
func (c *Cluster) pick(g *Group, counts map[NodeID]int) NodeID {
	used := c.zonesOf(g.Replicas)
	var best *Node
	for i := range c.nodes {
		n := &c.nodes[i]
		if !n.Alive || g.Has(n.ID) {
			continue
		}
		if best == nil || better(n, best, used, counts) {
			best = n
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// better reports whether a beats b as the home of a new replica. Nodes are
// walked in ID order and only a strictly better one replaces the best so
// far, so an exact tie goes to the smaller ID.
func better(a, b *Node, used map[string]bool, counts map[NodeID]int) bool {
	newA := a.Zone != "" && !used[a.Zone]
	newB := b.Zone != "" && !used[b.Zone]
	if newA != newB {
		return newA
	}
	return counts[a.ID] < counts[b.ID]
}

// zonesOf is the set of zones the live nodes among ids are in (dead
// replicas are being replaced, so their zone is free again).
func (c *Cluster) zonesOf(ids []NodeID) map[string]bool {
	z := map[string]bool{}
	for _, id := range ids {
		if n := c.node(id); n != nil && n.Alive && n.Zone != "" {
			z[n.Zone] = true
		}
	}
	return z
}

// leastLed is the id among ids that leads the fewest groups, the smallest
// ID on a tie; "" if ids is empty.
func leastLed(ids []NodeID, leaders map[NodeID]int) NodeID {
	var best NodeID
	for _, id := range sorted(ids) {
		if best == "" || leaders[id] < leaders[best] {
			best = id
		}
	}
	return best
}

// Nodes is a copy of the cluster's nodes in ID order.
func (c *Cluster) Nodes() []Node { return slices.Clone(c.nodes) }

// Groups is the cluster's groups in ID order. The pointers are the
// cluster's own: callers read them (tests may corrupt them on purpose).
func (c *Cluster) Groups() []*Group { return slices.Clone(c.groups) }

// Group is the group with the given ID, or nil.
func (c *Cluster) Group(id int) *Group {
	for _, g := range c.groups {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// Live is the IDs of the live nodes, in order.
func (c *Cluster) Live() []NodeID {
	var ids []NodeID
	for _, n := range c.nodes {
		if n.Alive {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

func (c *Cluster) node(id NodeID) *Node {
	for i := range c.nodes {
		if c.nodes[i].ID == id {
			return &c.nodes[i]
		}
	}
	return nil
}

func (c *Cluster) alive(id NodeID) bool {
	n := c.node(id)
	return n != nil && n.Alive
}

// liveReplicas is g's replicas on live nodes, in ID order.
func (c *Cluster) liveReplicas(g *Group) []NodeID {
	var ids []NodeID
	for _, id := range sorted(g.Replicas) {
		if c.alive(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// replicaCounts is the number of replicas on each live node (every live
// node present, with 0 if it holds none).
func (c *Cluster) replicaCounts() map[NodeID]int {
	m := map[NodeID]int{}
	for _, id := range c.Live() {
		m[id] = 0
	}
	for _, g := range c.groups {
		for _, id := range g.Replicas {
			if _, ok := m[id]; ok {
				m[id]++
			}
		}
	}
	return m
}

// leaderCounts is the number of groups each live node leads.
func (c *Cluster) leaderCounts() map[NodeID]int {
	m := map[NodeID]int{}
	for _, id := range c.Live() {
		m[id] = 0
	}
	for _, g := range c.groups {
		if _, ok := m[g.Leader]; ok {
			m[g.Leader]++
		}
	}
	return m
}

// ErrUnknownNode and ErrNodeState are returned for a Fail or Join that
// names a node in the wrong state.
var (
	ErrUnknownNode = errors.New("placement: unknown node")
	ErrNodeState   = errors.New("placement: node is already in that state")
)

func sorted(ids []NodeID) []NodeID {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
