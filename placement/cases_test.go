package placement

import (
	"errors"
	"strings"
	"testing"
)

func cluster(t *testing.T, n, groups, r int) *Cluster {
	t.Helper()
	var nodes []Node
	for i := 1; i <= n; i++ {
		nodes = append(nodes, Node{ID: nodeID(i), Alive: true})
	}
	gs := make([]Group, groups)
	for i := range gs {
		gs[i].ID = i + 1
	}
	c, err := Place(gs, nodes, r)
	if err != nil {
		t.Fatal(err)
	}
	c.BalanceLeaders()
	return c
}

// TestCheckCatchesCorruption: the invariants the simulation leans on must
// actually fail on a bad state, or every assertion built on Check is
// empty.
func TestCheckCatchesCorruption(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		corrupt    func(c *Cluster, g *Group)
	}{
		{"two replicas on one node", "two replicas on node", func(c *Cluster, g *Group) { g.Replicas[1] = g.Replicas[0] }},
		{"leader not a replica", "is not a replica", func(c *Cluster, g *Group) {
			for _, id := range c.Live() {
				if !g.Has(id) {
					g.Leader = id
					return
				}
			}
		}},
		{"dead replica kept with nodes to spare", "live replicas", func(c *Cluster, g *Group) { c.node(g.Replicas[2]).Alive = false }},
		{"too few replicas", "2 replicas, want 3", func(c *Cluster, g *Group) { g.Replicas = g.Replicas[:2] }},
		{"no leader with a quorum", "no leader", func(c *Cluster, g *Group) { g.Leader = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t, 5, 20, 3)
			mustCheck(t, c, "before")
			tc.corrupt(c, c.Group(7))
			err := c.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestNoTwoReplicasOnOneNode sets up the trap directly: the least-loaded
// node already holds the group, so a pick that forgot to exclude a
// group's own replicas would choose it.
func TestNoTwoReplicasOnOneNode(t *testing.T) {
	c := cluster(t, 4, 4, 3) // 12 replicas on 4 nodes
	g := c.Group(1)
	counts := c.replicaCounts()
	holder := g.Replicas[0]
	counts[holder] = -100 // by far the least loaded
	if got := c.pick(g, counts); got == "" || g.Has(got) {
		t.Fatalf("pick = %q for group on %v", got, g.Replicas)
	}
	// And end to end: with exactly R live nodes every group must sit on
	// all of them, once each.
	if _, err := c.Fail(nodeID(4)); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c, "fail n04")
}

// TestNotEnoughNodes: below R live nodes a dead replica stays (no
// replacement exists), the group stays available on its quorum, and the
// node that joins next repairs exactly those groups.
func TestNotEnoughNodes(t *testing.T) {
	c := cluster(t, 4, 8, 3)
	if _, err := c.Fail(nodeID(1)); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c, "fail n01")
	held := c.replicaCounts()[nodeID(2)] // every group, on 3 live nodes
	m, err := c.Fail(nodeID(2))
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c, "fail n02")
	rep := c.Report()
	if m.Replicas != 0 || rep.UnderReplicated != held || rep.Leaderless != 0 {
		t.Fatalf("with 2 live nodes: moves %d, under-replicated %d (want %d), leaderless %d",
			m.Replicas, rep.UnderReplicated, held, rep.Leaderless)
	}
	m, err = c.Join(Node{ID: "n05"})
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, c, "join n05")
	if m.Replicas != held || c.Report().UnderReplicated != 0 {
		t.Fatalf("join: %d repairs, want %d; %d still under-replicated", m.Replicas, held, c.Report().UnderReplicated)
	}
}

// TestZones: 9 nodes in 3 zones. Every group spans the 3 zones; a dead
// node's replicas are replaced inside its own zone (the only zone the
// group lacks), so its zone-mates absorb them. When a whole zone is gone, availability
// wins over spread: the groups get R replicas in the other zones.
func TestZones(t *testing.T) {
	var nodes []Node
	for i := 1; i <= 9; i++ {
		nodes = append(nodes, Node{ID: nodeID(i), Zone: string(rune('a' + (i-1)%3)), Alive: true})
	}
	gs := make([]Group, 36)
	for i := range gs {
		gs[i].ID = i + 1
	}
	c, err := Place(gs, nodes, 3)
	if err != nil {
		t.Fatal(err)
	}
	c.BalanceLeaders()
	spread := func(step string) {
		t.Helper()
		for _, g := range c.groups {
			if z := len(c.zonesOf(g.Replicas)); z != 3 {
				t.Fatalf("%s: group %d on %v spans %d zones", step, g.ID, g.Replicas, z)
			}
		}
	}
	spread("place")
	mustBalance(t, c, "place")
	if _, err := c.Fail(nodeID(1)); err != nil { // zone a
		t.Fatal(err)
	}
	spread("fail n01")
	c.Rebalance()
	c.BalanceLeaders()
	spread("fail n01, rebalanced")
	mustCheck(t, c, "fail n01")
	// Spread outranks balance across zones: zone a's share (one replica
	// of every group) now sits on its two survivors, 18 each against 12
	// in zones b and c. Within a zone the counts stay even.
	counts := c.replicaCounts()
	for id, want := range map[NodeID]int{"n04": 18, "n07": 18, "n02": 12, "n05": 12, "n08": 12, "n03": 12, "n06": 12, "n09": 12} {
		if counts[id] != want {
			t.Errorf("fail n01: %s holds %d replicas, want %d", id, counts[id], want)
		}
	}
	if r := c.Report(); r.MaxLeaders > ceilMean(r.MeanLeaders)+1 {
		t.Errorf("fail n01: a node leads %d groups (mean %.2f)", r.MaxLeaders, r.MeanLeaders)
	}
	for _, id := range []NodeID{"n04", "n07"} { // the rest of zone a
		if _, err := c.Fail(id); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, c, "zone a gone")
	if _, err := c.Join(Node{ID: "n01", Zone: "a"}); err != nil {
		t.Fatal(err)
	}
	c.Rebalance()
	c.BalanceLeaders()
	mustCheck(t, c, "n01 back")
	mustBalance(t, c, "n01 back")
}

func TestSplitAndMoveTenant(t *testing.T) {
	c := cluster(t, 5, 20, 3)
	g := c.Group(3)
	g.Tenants = map[string]int64{"a": 50, "b": 30, "c": 25, "d": 10}
	c.Group(4).Tenants = map[string]int64{"solo": 1000}

	if _, err := c.Split(4, 100); !errors.Is(err, ErrSingleTenant) {
		t.Fatalf("split of a one-tenant group: %v, want ErrSingleTenant", err)
	}
	m, err := c.Split(3, 21)
	if err != nil {
		t.Fatal(err)
	}
	// Greedy: a→keep(50), b→move(30), c→move(55), d→keep(60); the
	// lighter half (b, c: 55) moves.
	checkSplit(t, c, 3, 21, 115, 4, m)
	if c.GroupOf("b").ID != 21 || c.GroupOf("c").ID != 21 || c.GroupOf("a").ID != 3 {
		t.Fatalf("split: b in %d, c in %d, a in %d", c.GroupOf("b").ID, c.GroupOf("c").ID, c.GroupOf("a").ID)
	}
	mustCheck(t, c, "split")
	mustBalance(t, c, "split")

	m, err = c.MoveTenant("solo", 21)
	if err != nil || m != (Moves{Tenants: 1, Bytes: 1000}) || c.GroupOf("solo").ID != 21 {
		t.Fatalf("move solo: %+v, %v, now in %d", m, err, c.GroupOf("solo").ID)
	}
	if _, err := c.MoveTenant("nobody", 1); !errors.Is(err, ErrUnknown) {
		t.Fatalf("move of an unknown tenant: %v", err)
	}
	mustCheck(t, c, "move")
}

func TestBadInput(t *testing.T) {
	nodes := []Node{{ID: "n01", Alive: true}, {ID: "n02", Alive: true}}
	if _, err := Place([]Group{{ID: 1}}, nodes, 3); err == nil {
		t.Error("Place with 2 nodes for R=3 succeeded")
	}
	if _, err := Place([]Group{{ID: 1}}, append(nodes, nodes[0]), 1); err == nil {
		t.Error("Place with a duplicate node succeeded")
	}
	c := cluster(t, 3, 3, 3)
	if _, err := c.Fail("n09"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("Fail(unknown) = %v", err)
	}
	if _, err := c.Join(Node{ID: "n01"}); !errors.Is(err, ErrNodeState) {
		t.Errorf("Join(alive) = %v", err)
	}
}
