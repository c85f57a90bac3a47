package placement

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// The simulation: for 5, 9 and 25 nodes, R = 3 and 4 groups per node,
// place; kill nodes one at a time (at most 3, and never below R live),
// replacing, re-electing and rebalancing after each; bring the first dead
// node back empty; split the heaviest group. Every step is checked, and
// the steps make the table DESIGN.md quotes (go test -v -run
// TestReportTable ./placement/).

const seed = 1

var sizes = []int{5, 9, 25}

func nodeID(i int) NodeID { return NodeID(fmt.Sprintf("n%02d", i)) }

// row is one step of a simulation.
type row struct {
	nodes, groups int
	step          string
	rep           Report
	change        Moves // what Fail, Join or Split did
	balance       Moves // what Rebalance and BalanceLeaders did after
}

func simulate(t *testing.T, n int) []row {
	t.Helper()
	const r = 3
	rng := rand.New(rand.NewSource(seed + int64(n)))
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{ID: nodeID(i + 1), Alive: true}
	}
	groups := make([]Group, 4*n)
	tenant := 0
	for i := range groups {
		groups[i] = Group{ID: i + 1, Tenants: map[string]int64{}}
		for k := 1 + rng.Intn(4); k > 0; k-- {
			tenant++
			groups[i].Tenants[fmt.Sprintf("t%04d", tenant)] = 1 + rng.Int63n(1<<20)
		}
	}
	c, err := Place(groups, nodes, r)
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	record := func(step string, change, balance Moves) {
		t.Helper()
		mustCheck(t, c, step)
		mustBalance(t, c, step)
		mustSpread(t, c, step)
		rows = append(rows, row{n, len(c.groups), step, c.Report(), change, balance})
	}
	record("place", Moves{}, Moves{Transfers: c.BalanceLeaders()})

	victims := rng.Perm(n)[:min(3, n-r)]
	for _, v := range victims {
		id := nodeID(v + 1)
		held, led := c.replicaCounts()[id], c.leaderCounts()[id]
		change, err := c.Fail(id)
		if err != nil {
			t.Fatal(err)
		}
		step := "fail " + string(id)
		// No gratuitous moves: exactly the dead node's replicas move, and
		// exactly the groups it led elect.
		if change.Replicas != held {
			t.Errorf("%s: %d replica moves, want %d (the replicas it held)", step, change.Replicas, held)
		}
		if change.Elections != led {
			t.Errorf("%s: %d elections, want %d (the groups it led)", step, change.Elections, led)
		}
		mustCheck(t, c, step+" before balancing")
		lo, hi := moveBounds(c.replicaCounts())
		balance := c.Rebalance()
		if balance.Replicas < lo || balance.Replicas > hi {
			t.Errorf("%s: %d rebalance moves, want %d..%d", step, balance.Replicas, lo, hi)
		}
		balance.Transfers += c.BalanceLeaders()
		// The failure displaced led leaderships; undoing the pile-up
		// they caused on the survivors must not take more than two
		// transfers each.
		if balance.Transfers > 2*led {
			t.Errorf("%s: %d leader transfers for %d lost leaderships", step, balance.Transfers, led)
		}
		record(step, change, balance)
	}

	back := nodeID(victims[0] + 1)
	before := c.replicaCounts()
	before[back] = 0
	change, err := c.Join(Node{ID: back})
	if err != nil {
		t.Fatal(err)
	}
	if change.Replicas != 0 {
		t.Errorf("join %s: %d repair moves, but no group was under-replicated", back, change.Replicas)
	}
	balance := c.Rebalance()
	balance.Transfers += c.BalanceLeaders()
	lo, hi := moveBounds(before)
	if balance.Replicas < lo || balance.Replicas > hi {
		t.Errorf("join %s: %d rebalance moves, want %d..%d", back, balance.Replicas, lo, hi)
	}
	if share := ceilMean(c.Report().MeanLeaders); balance.Transfers > 2*share {
		t.Errorf("join %s: %d leader transfers, want at most %d", back, balance.Transfers, 2*share)
	}
	record("join "+string(back), change, balance)

	g := heaviest(c)
	weight, tenants := g.Weight(), len(g.Tenants)
	newID := c.groups[len(c.groups)-1].ID + 1
	change, err = c.Split(g.ID, newID)
	if err != nil {
		t.Fatal(err)
	}
	checkSplit(t, c, g.ID, newID, weight, tenants, change)
	lo, hi = moveBounds(c.replicaCounts())
	balance = c.Rebalance()
	if balance.Replicas < lo || balance.Replicas > hi {
		t.Errorf("split: %d rebalance moves, want %d..%d", balance.Replicas, lo, hi)
	}
	balance.Transfers += c.BalanceLeaders()
	record(fmt.Sprintf("split g%d", g.ID), change, balance)
	return rows
}

// mustCheck fails the test on any broken invariant (Check).
func mustCheck(t *testing.T, c *Cluster, step string) {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// mustBalance fails the test if a live node holds or leads more than one
// above the ceiling of the mean.
func mustBalance(t *testing.T, c *Cluster, step string) {
	t.Helper()
	r := c.Report()
	if limit := ceilMean(r.MeanReplicas) + 1; r.MaxReplicas > limit {
		t.Errorf("%s: a node holds %d replicas, limit %d (mean %.2f)", step, r.MaxReplicas, limit, r.MeanReplicas)
	}
	if limit := ceilMean(r.MeanLeaders) + 1; r.MaxLeaders > limit {
		t.Errorf("%s: a node leads %d groups, limit %d (mean %.2f)", step, r.MaxLeaders, limit, r.MeanLeaders)
	}
}

// mustSpread is the balancers' own promise, stronger than mustBalance,
// for a cluster without zones: after Rebalance and BalanceLeaders no live
// node holds or leads two more than another.
func mustSpread(t *testing.T, c *Cluster, step string) {
	t.Helper()
	r := c.Report()
	if r.MaxReplicas-r.MinReplicas > 1 || r.MaxLeaders-r.MinLeaders > 1 {
		t.Errorf("%s: replicas %d..%d, leaders %d..%d per node", step, r.MinReplicas, r.MaxReplicas, r.MinLeaders, r.MaxLeaders)
	}
}

func ceilMean(m float64) int { return int(math.Ceil(m - 1e-9)) }

// moveBounds is the fewest and the most replica moves that can bring
// counts to within one of each other. Fewest: every node below the floor
// of the mean must gain up to it, one move per replica. Most, for a
// balancer that only takes from a node above the floor: the replicas
// above the floor.
func moveBounds(counts map[NodeID]int) (lo, hi int) {
	total := 0
	for _, n := range counts {
		total += n
	}
	floor := total / len(counts)
	for _, n := range counts {
		lo += max(0, floor-n)
		hi += max(0, n-floor)
	}
	return lo, hi
}

func heaviest(c *Cluster) *Group {
	var best *Group
	for _, g := range c.groups {
		if len(g.Tenants) >= 2 && (best == nil || g.Weight() > best.Weight()) {
			best = g
		}
	}
	return best
}

// checkSplit asserts what a split must keep: the weight and tenants of
// the old group are now the two groups', the halves differ by at most
// the heaviest tenant, the lighter half moved, and the moves count it.
func checkSplit(t *testing.T, c *Cluster, oldID, newID int, weight int64, tenants int, m Moves) {
	t.Helper()
	a, b := c.Group(oldID), c.Group(newID)
	if b == nil {
		t.Fatalf("split: no group %d", newID)
	}
	if a.Weight()+b.Weight() != weight || len(a.Tenants)+len(b.Tenants) != tenants {
		t.Errorf("split: weight %d+%d of %d, tenants %d+%d of %d",
			a.Weight(), b.Weight(), weight, len(a.Tenants), len(b.Tenants), tenants)
	}
	var heaviest int64
	for _, g := range []*Group{a, b} {
		for _, w := range g.Tenants {
			heaviest = max(heaviest, w)
		}
	}
	if d := a.Weight() - b.Weight(); d < 0 || d > heaviest {
		t.Errorf("split: halves %d and %d (heaviest tenant %d): the moved half must be the lighter, within one tenant",
			a.Weight(), b.Weight(), heaviest)
	}
	if m.Tenants != len(b.Tenants) || m.Bytes != b.Weight() || m.Replicas != 0 {
		t.Errorf("split: moves %+v, want %d tenants, %d bytes, no replica moves", m, len(b.Tenants), b.Weight())
	}
}

func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5s %6s %-10s %4s %13s %13s %6s %6s %6s %5s %14s\n",
		"nodes", "groups", "step", "live", "repl max/mean", "lead max/mean",
		"moves", "rebal", "elect", "xfer", "tenants(bytes)")
	for _, r := range rows {
		tenants := "-"
		if r.change.Tenants > 0 {
			tenants = fmt.Sprintf("%d(%d)", r.change.Tenants, r.change.Bytes)
		}
		fmt.Fprintf(&b, "%5d %6d %-10s %4d %6d/%6.2f %6d/%6.2f %6d %6d %6d %5d %14s\n",
			r.nodes, r.groups, r.step, r.rep.Live,
			r.rep.MaxReplicas, r.rep.MeanReplicas, r.rep.MaxLeaders, r.rep.MeanLeaders,
			r.change.Replicas, r.balance.Replicas, r.change.Elections,
			r.change.Transfers+r.balance.Transfers, tenants)
	}
	return b.String()
}

func TestSimulation(t *testing.T) {
	for _, n := range sizes {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			t.Logf("\n%s", table(simulate(t, n)))
		})
	}
}

// TestReportTable's log is the table in DESIGN.md: moves = replica moves
// done by the failure or join itself (replacement, repair), rebal = by
// Rebalance after it, elect = forced elections, xfer = leadership
// transfers by the balancers.
func TestReportTable(t *testing.T) {
	var rows []row
	for _, n := range sizes {
		rows = append(rows, simulate(t, n)...)
	}
	t.Logf("R=3, groups=4×nodes, seed %d\n%s", seed, table(rows))
}

func TestDeterministic(t *testing.T) {
	a, b := simulate(t, 9), simulate(t, 9)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%s\n%s", table(a), table(b))
	}
}

// TestRandomChurn fails and joins nodes at random (seeded) and checks the
// invariants and balance after every step, including steps where a node
// that is still listed by some groups (no replacement existed) comes back.
func TestRandomChurn(t *testing.T) {
	const n, r, steps = 9, 3, 300
	rng := rand.New(rand.NewSource(seed))
	var nodes []Node
	for i := 1; i <= n; i++ {
		nodes = append(nodes, Node{ID: nodeID(i), Alive: true})
	}
	groups := make([]Group, 4*n)
	for i := range groups {
		groups[i].ID = i + 1
	}
	c, err := Place(groups, nodes, r)
	if err != nil {
		t.Fatal(err)
	}
	c.BalanceLeaders()
	rejoined := 0 // joins of a node some groups still listed
	for s := 0; s < steps; s++ {
		id := nodeID(1 + rng.Intn(n))
		var err error
		if c.alive(id) {
			if len(c.Live()) <= r-1 {
				continue // keep a quorum of every group alive
			}
			_, err = c.Fail(id)
		} else {
			for _, g := range c.groups {
				if g.Has(id) {
					rejoined++
					break
				}
			}
			_, err = c.Join(Node{ID: id})
		}
		if err != nil {
			t.Fatal(err)
		}
		step := fmt.Sprintf("step %d (%s)", s, id)
		mustCheck(t, c, step)
		c.Rebalance()
		c.BalanceLeaders()
		mustCheck(t, c, step)
		if len(c.Live()) >= r {
			mustBalance(t, c, step)
			mustSpread(t, c, step)
		}
	}
	if rejoined == 0 {
		t.Error("no step brought back a node that groups still listed: the churn misses that path")
	}
	t.Logf("%d steps, %d rejoins of a still-listed node", steps, rejoined)
}
