package placement

import (
	"errors"
	"fmt"
)

// Report is the balance of a state, over live nodes.
type Report struct {
	Live, Groups int
	// Replicas held per live node.
	MaxReplicas, MinReplicas int
	MeanReplicas             float64
	// Groups led per live node.
	MaxLeaders, MinLeaders int
	MeanLeaders            float64
	// UnderReplicated: groups with fewer than R live replicas.
	// Leaderless: groups with no quorum, hence no leader.
	UnderReplicated, Leaderless int
}

// Report measures the cluster.
func (c *Cluster) Report() Report {
	rc, lc := c.replicaCounts(), c.leaderCounts()
	live := c.Live()
	r := Report{Live: len(live), Groups: len(c.groups)}
	for i, id := range live {
		if i == 0 || rc[id] > r.MaxReplicas {
			r.MaxReplicas = rc[id]
		}
		if i == 0 || rc[id] < r.MinReplicas {
			r.MinReplicas = rc[id]
		}
		if i == 0 || lc[id] > r.MaxLeaders {
			r.MaxLeaders = lc[id]
		}
		if i == 0 || lc[id] < r.MinLeaders {
			r.MinLeaders = lc[id]
		}
		r.MeanReplicas += float64(rc[id])
		r.MeanLeaders += float64(lc[id])
	}
	if len(live) > 0 {
		r.MeanReplicas /= float64(len(live))
		r.MeanLeaders /= float64(len(live))
	}
	for _, g := range c.groups {
		if len(c.liveReplicas(g)) < c.R {
			r.UnderReplicated++
		}
		if g.Leader == "" {
			r.Leaderless++
		}
	}
	return r
}

// Check verifies the invariants every state must keep and returns every
// violation found (nil if none):
//
//   - a group has R replicas, all on distinct, known nodes;
//   - it has as many live replicas as the cluster can give it, min(R, live
//     nodes): all R whenever R nodes are alive;
//   - its leader is one of its replicas and alive, unless the group has
//     lost its quorum (then it has none);
//   - every tenant is in exactly one group (a tenant listed twice would be
//     written in two logs).
func (c *Cluster) Check() error {
	var errs []error
	bad := func(g *Group, format string, args ...any) {
		errs = append(errs, fmt.Errorf("group %d: %s", g.ID, fmt.Sprintf(format, args...)))
	}
	want := min(c.R, len(c.Live()))
	owner := map[string]int{}
	for _, g := range c.groups {
		if len(g.Replicas) != c.R {
			bad(g, "%d replicas, want %d", len(g.Replicas), c.R)
		}
		seen := map[NodeID]bool{}
		for _, id := range g.Replicas {
			if seen[id] {
				bad(g, "two replicas on node %s", id)
			}
			seen[id] = true
			if c.node(id) == nil {
				bad(g, "replica on unknown node %s", id)
			}
		}
		live := len(c.liveReplicas(g))
		if live < want {
			bad(g, "%d live replicas, want %d", live, want)
		}
		quorum := live > len(g.Replicas)/2
		switch {
		case g.Leader == "" && quorum:
			bad(g, "no leader though %d of %d replicas live", live, len(g.Replicas))
		case g.Leader != "" && !g.Has(g.Leader):
			bad(g, "leader %s is not a replica", g.Leader)
		case g.Leader != "" && !c.alive(g.Leader):
			bad(g, "leader %s is dead", g.Leader)
		}
		for t := range g.Tenants {
			if o, ok := owner[t]; ok {
				bad(g, "tenant %q also in group %d", t, o)
			}
			owner[t] = g.ID
		}
	}
	return errors.Join(errs...)
}
