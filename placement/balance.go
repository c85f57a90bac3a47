package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// Moves counts what an operation changed, in the units that cost
// something in a real cluster.
type Moves struct {
	// Replicas: replica moves, each one voter added (a snapshot to ship)
	// and one removed.
	Replicas int
	// Elections: groups whose leader died and which elected another
	// (Raft's election timeout decides, not the balancer), or which came
	// back to a quorum and elected one.
	Elections int
	// Transfers: leaderships the balancer chose to move (one Raft
	// leadership transfer each: a short write pause on that group).
	Transfers int
	// Tenants and Bytes: tenants moved between groups and their weight.
	Tenants int
	Bytes   int64
}

// Add adds o to m.
func (m *Moves) Add(o Moves) {
	m.Replicas += o.Replicas
	m.Elections += o.Elections
	m.Transfers += o.Transfers
	m.Tenants += o.Tenants
	m.Bytes += o.Bytes
}

// Fail declares a node dead. First every group it led elects a new leader
// among its surviving replicas (in a real cluster this happens within an
// election timeout, long before the node is declared dead); then every
// replica it held is replaced, one move each, on the best live node that
// does not hold that group yet (pick). Nothing else moves: balancing is
// Rebalance's and BalanceLeaders' job, run after.
//
// A replica with no possible replacement (fewer live nodes than R) stays
// in the group, dead, and the group is under-replicated until a node
// joins.
func (c *Cluster) Fail(id NodeID) (Moves, error) {
	n := c.node(id)
	if n == nil {
		return Moves{}, fmt.Errorf("%w %s", ErrUnknownNode, id)
	}
	if !n.Alive {
		return Moves{}, fmt.Errorf("%w: %s is dead", ErrNodeState, id)
	}
	n.Alive = false
	var m Moves
	for _, g := range c.groups {
		if !g.Has(id) {
			continue
		}
		if g.Leader == id {
			if g.Leader = c.elect(g); g.Leader != "" {
				m.Elections++
			}
		} else if c.elect(g) == "" {
			// The leader is alive but has lost its quorum: it steps
			// down (CheckQuorum) and no one can replace it.
			g.Leader = ""
		}
	}
	m.Replicas = c.repair()
	return m, nil
}

// elect is the replica that wins an election in g: Raft needs a majority
// of the group's voters alive (dead voters still count in the
// configuration), and which survivor wins is up to the election timers.
// The model takes the smallest ID: deterministic, and it piles
// leaderships onto the same nodes, which leaves the balancer real work.
// "" means the group has lost its quorum: no leader until an operator
// recovers it (Raft cannot change a configuration without a quorum).
func (c *Cluster) elect(g *Group) NodeID {
	live := c.liveReplicas(g)
	if len(live) <= len(g.Replicas)/2 {
		return ""
	}
	return live[0]
}

// Join brings a node in: a new node starts empty; a dead node declared
// alive again rejoins the groups that still list it (those whose replica
// had no replacement) and catches up from their logs, with no move. Then
// every under-replicated group is repaired before anything is balanced:
// restoring R comes first, as in CockroachDB's replicate queue. Call
// Rebalance and BalanceLeaders to give the node its share.
func (c *Cluster) Join(n Node) (Moves, error) {
	if old := c.node(n.ID); old != nil {
		if old.Alive {
			return Moves{}, fmt.Errorf("%w: %s is alive", ErrNodeState, n.ID)
		}
		old.Alive = true
		if n.Zone != "" {
			old.Zone = n.Zone
		}
	} else {
		n.Alive = true
		c.nodes = append(c.nodes, n)
		slices.SortFunc(c.nodes, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	}
	var m Moves
	for _, g := range c.groups {
		if g.Leader == "" {
			// A quorum may be back; no leader existed, so this is an
			// election, not a transfer.
			if g.Leader = c.elect(g); g.Leader != "" {
				m.Elections++
			}
		}
	}
	m.Replicas = c.repair()
	return m, nil
}

// repair replaces every dead replica that has a possible replacement, in
// group order, and returns the number of moves. The fresh replica never
// becomes leader here: a leaderless group stays so (no quorum), and a
// group with a leader keeps it.
func (c *Cluster) repair() int {
	counts := c.replicaCounts()
	moves := 0
	for _, g := range c.groups {
		if g.Leader == "" {
			// No quorum, so no configuration change can commit.
			continue
		}
		for i, id := range g.Replicas {
			if c.alive(id) {
				continue
			}
			to := c.pick(g, counts)
			if to == "" {
				continue
			}
			g.Replicas[i] = to
			counts[to]++
			moves++
		}
	}
	return moves
}

// Rebalance moves replicas from the most- to the least-loaded live nodes
// until every live node's replica count is within one of every other's
// (or no allowed move is left), and returns the moves. A move never puts
// two replicas of a group on one node, never lowers a group's zone spread
// and prefers a group the source does not lead, so most moves need no
// leadership transfer. Each move narrows the spread (the source has at
// least two more replicas than the target), so the loop ends.
func (c *Cluster) Rebalance() Moves {
	var m Moves
	for limit := len(c.groups) * c.R; limit > 0; limit-- {
		counts := c.replicaCounts()
		live := c.Live()
		heavy := slices.Clone(live) // most replicas first
		slices.SortStableFunc(heavy, func(a, b NodeID) int { return cmp.Compare(counts[b], counts[a]) })
		light := slices.Clone(live) // fewest replicas first
		slices.SortStableFunc(light, func(a, b NodeID) int { return cmp.Compare(counts[a], counts[b]) })
		moved := false
	search:
		for _, src := range heavy {
			for _, dst := range light {
				if counts[src]-counts[dst] < 2 {
					break // light is ascending: no later dst is lighter
				}
				if g := c.movable(src, dst); g != nil {
					m.Transfers += c.move(g, src, dst)
					m.Replicas++
					moved = true
					break search
				}
			}
		}
		if !moved {
			break
		}
	}
	return m
}

// movable is the group whose replica on src should move to dst, or nil: it
// has a replica on src, none on dst, and keeps its zone spread. Among
// those, one src does not lead (no transfer needed), then one whose spread
// grows, then the smallest group ID.
func (c *Cluster) movable(src, dst NodeID) *Group {
	var best *Group
	bestLead, bestGain := false, 0
	for _, g := range c.groups {
		if !g.Has(src) || g.Has(dst) || g.Leader == "" {
			continue
		}
		before := len(c.zonesOf(g.Replicas))
		after := len(c.zonesOf(replace(g.Replicas, src, dst)))
		if after < before {
			continue
		}
		lead, gain := g.Leader == src, after-before
		if best == nil || (!lead && bestLead) || (lead == bestLead && gain > bestGain) {
			best, bestLead, bestGain = g, lead, gain
		}
	}
	return best
}

// move replaces g's replica on src with one on dst. In Raft order: dst is
// added and catches up, leadership leaves src if src leads (to the other
// replica leading fewest groups, not to the newcomer), then src is
// removed. It returns the leadership transfers (0 or 1).
func (c *Cluster) move(g *Group, src, dst NodeID) int {
	transfers := 0
	if g.Leader == src {
		var others []NodeID
		for _, id := range c.liveReplicas(g) {
			if id != src {
				others = append(others, id)
			}
		}
		if len(others) == 0 {
			others = []NodeID{dst} // R = 1: the newcomer is the only choice
		}
		g.Leader = leastLed(others, c.leaderCounts())
		transfers = 1
	}
	g.Replicas = replace(g.Replicas, src, dst)
	return transfers
}

// BalanceLeaders moves leaderships until no live node leads two or more
// groups more than another it could pass one to, and returns the
// transfers. A leadership can only go to a live replica of its group, so
// when the most-loaded node's followers are all busy too the balancer
// looks for a chain: src hands group a to v, v hands group b to w, ...,
// until a node with at least two fewer leaderships than src; every node in
// between keeps its count. The search is breadth first, so a direct
// transfer is always preferred to a chain. Each chain lowers the sum of
// squared leader counts, so the loop ends.
func (c *Cluster) BalanceLeaders() int {
	transfers := 0
	for limit := len(c.groups) * len(c.nodes); limit > 0; limit-- {
		lc := c.leaderCounts()
		srcs := c.Live()
		slices.SortStableFunc(srcs, func(a, b NodeID) int { return cmp.Compare(lc[b], lc[a]) })
		var chain []hop
		for _, src := range srcs {
			if chain = c.chain(src, lc); chain != nil {
				break
			}
		}
		if chain == nil {
			break
		}
		for _, h := range chain {
			h.g.Leader = h.to
			transfers++
		}
	}
	return transfers
}

// hop is one leadership transfer: g's leadership goes to node to.
type hop struct {
	g  *Group
	to NodeID
}

// chain is the shortest sequence of transfers that takes one leadership
// off src and gives one to a node with at most lc[src]-2, or nil.
func (c *Cluster) chain(src NodeID, lc map[NodeID]int) []hop {
	via := map[NodeID]hop{}     // how each reached node got a leadership
	from := map[NodeID]NodeID{} // and from whom
	seen := map[NodeID]bool{src: true}
	queue := []NodeID{src}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, g := range c.groups {
			if g.Leader != u {
				continue
			}
			followers := c.liveReplicas(g)
			slices.SortStableFunc(followers, func(a, b NodeID) int { return cmp.Compare(lc[a], lc[b]) })
			for _, v := range followers {
				if seen[v] {
					continue
				}
				seen[v], via[v], from[v] = true, hop{g, v}, u
				if lc[v] <= lc[src]-2 {
					var path []hop
					for x := v; x != src; x = from[x] {
						path = append(path, via[x])
					}
					slices.Reverse(path)
					return path
				}
				queue = append(queue, v)
			}
		}
	}
	return nil
}

// replace is ids with old swapped for new, in a new slice.
func replace(ids []NodeID, old, new NodeID) []NodeID {
	out := slices.Clone(ids)
	for i, id := range out {
		if id == old {
			out[i] = new
		}
	}
	return out
}
