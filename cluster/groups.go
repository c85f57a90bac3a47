package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/tenant"
)

// Groups are the Raft groups one node runs (--raft-groups N): N Nodes, each
// a hashicorp/raft instance with its own log, state file, message files
// and snapshots, over one Raft port (a raftlog.Mux) and one gossip
// membership (group 0's). A tenant lives in exactly one group, so that a
// transaction is still one entry of one log; each group's leader may be
// another node, which is how a cluster's writes use more than one node's
// CPU. With N = 1 it is one Node, as before groups: the same data dir, the
// same wire, the same metrics.
//
// Every call of a front end goes to the group of its tenant (For); what is
// a node's (its id, readiness) is group 0's or every group's.
type Groups struct {
	nodes []*Node
	mux   *raftlog.Mux // nil with one group
	log   *slog.Logger

	bootMu   sync.Mutex
	bootWith []raft.Server // the voters group 0 bootstrapped with; nil = not yet

	// written: tenants whose first write the placement table holds, and
	// their group (such a row never changes)
	written sync.Map // tenant name → int

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// StartGroups starts n groups with cfg (n <= 1: one, as Start does). The
// data dir holds group 0 as it always did and group g > 0 under
// groups/<g>; it records n, and a node started with another n than its
// data dir holds is refused, naming both.
func StartGroups(cfg Config, n int) (*Groups, error) {
	if n < 1 {
		n = 1
	}
	if err := checkRaftGroups(cfg.DataDir, n); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	gs := &Groups{log: cfg.Logger, stop: make(chan struct{})}
	if n == 1 {
		node, err := Start(cfg)
		if err != nil {
			return nil, err
		}
		gs.nodes = []*Node{node}
		return gs, nil
	}
	mux, err := raftlog.NewMux(cfg.RaftAddr, cfg.RaftAdvertise, n, serverTLS(cfg.PeerTLS), clientTLS(cfg.PeerTLS),
		newHCLogger(cfg.Logger, "raft"))
	if err != nil {
		return nil, err
	}
	gs.mux = mux
	for g := range n {
		gc := cfg
		gc.Group, gc.Groups, gc.Layer = g, n, func() raft.StreamLayer { return mux.Layer(g) }
		gc.Logger = cfg.Logger.With("group", g)
		if cfg.Registry != nil {
			gc.Registry = prometheus.WrapRegistererWith(prometheus.Labels{"group": strconv.Itoa(g)}, cfg.Registry)
		}
		if g > 0 {
			gc.DataDir = filepath.Join(cfg.DataDir, "groups", strconv.Itoa(g))
			gc.members = gs.nodes[0].members // a rebuild of group g says so with its bit (meta.ResyncGroups)
		} else {
			gc.OnBootstrap = gs.bootstrapOthers
		}
		node, err := Start(gc)
		if err != nil {
			gs.Shutdown()
			return nil, fmt.Errorf("raft group %d: %w", g, err)
		}
		gs.nodes = append(gs.nodes, node)
		gs.bootstrapLate(node)
	}
	gs.wg.Add(1)
	go gs.balanceLoop()
	return gs, nil
}

// bootstrapOthers bootstraps every group started so far with the voters
// group 0 bootstrapped with (group 0's OnBootstrap).
func (gs *Groups) bootstrapOthers(servers []raft.Server) {
	gs.bootMu.Lock()
	defer gs.bootMu.Unlock()
	gs.bootWith = servers
	for _, n := range gs.nodes { // group 0 may be bootstrapping inside its Start, before it is listed
		if n.cfg.Group > 0 {
			gs.bootstrapOne(n)
		}
	}
}

// bootstrapLate bootstraps a group started after group 0 bootstrapped.
func (gs *Groups) bootstrapLate(n *Node) {
	if n.cfg.Group == 0 {
		return
	}
	gs.bootMu.Lock()
	defer gs.bootMu.Unlock()
	if gs.bootWith != nil {
		gs.bootstrapOne(n)
	}
}

func (gs *Groups) bootstrapOne(n *Node) {
	if has, err := n.stores.HasState(); err != nil || has {
		return
	}
	if err := n.bootstrap(gs.bootWith); err != nil {
		n.log.Warn("bootstrapping the group with group 0's voters failed; its leader adds this node instead", "err", err)
	}
}

// Count is how many groups the node runs.
func (gs *Groups) Count() int { return len(gs.nodes) }

// Group is group g's Node.
func (gs *Groups) Group(g int) *Node { return gs.nodes[g] }

// GroupOf is the group tenant name lives in: the default tenant in group 0
// (where a data dir of one group holds it); another as the placement table
// in group 0's state says (an operator's pin, or where it first wrote), or
// else by a stable hash of its name (FNV-1a), so every node places it
// alike without asking.
func (gs *Groups) GroupOf(name string) int {
	if len(gs.nodes) == 1 || name == tenant.Default {
		return 0
	}
	if g, ok := gs.written.Load(name); ok {
		return g.(int)
	}
	if rec := gs.placement(name); rec != nil && int(rec.Group) < len(gs.nodes) {
		if rec.Written {
			gs.written.Store(name, int(rec.Group))
		}
		return int(rec.Group)
	}
	return GroupOf(name, len(gs.nodes))
}

// placement is tenant name's row of the placement table as this node's
// group 0 holds it (nil = none).
func (gs *Groups) placement(name string) *command.PlacementRecord {
	var rec *command.PlacementRecord
	_ = gs.nodes[0].fsm.Read(func(rd *fsm.Reader) error { rec = rd.Placement(name); return nil })
	return rec
}

// writeTo is the group a write of the tenant ctx carries goes to, once the
// placement table records the tenant's first write there: a tenant's
// first write proposes that row in group 0 (once; a row with a write never
// changes), so that a pin and a first write elsewhere are ordered in one
// log and a tenant never holds data in two groups.
func (gs *Groups) writeTo(ctx context.Context) (*Node, error) {
	name := tenant.From(ctx)
	if _, forwarded := GroupFrom(ctx); forwarded || len(gs.nodes) == 1 || name == tenant.Default {
		return gs.For(ctx), nil
	}
	if g, ok := gs.written.Load(name); ok {
		return gs.nodes[g.(int)], nil
	}
	g := gs.GroupOf(name)
	for range 2 { // a pin this node had not seen yet: once more, where it says
		res, err := gs.nodes[0].Apply(tenant.With(ctx, tenant.Default),
			&command.Command{Body: &command.Command_PlaceTenant{PlaceTenant: &command.PlaceTenant{Tenant: name, Group: uint32(g)}}})
		if err != nil {
			return nil, err
		}
		r, ok := res.(*command.PlaceTenantResult)
		if !ok {
			return nil, fmt.Errorf("%w: placing tenant %s: %T", ErrInternal, name, res)
		}
		if r.Placed || r.Written {
			g = int(r.Group)
			gs.written.Store(name, g)
			return gs.nodes[g], nil
		}
		g = int(r.Group)
	}
	return nil, fmt.Errorf("%w: tenant %s: its placement moved twice under this write; retry", ErrOutcomeUnknown, name)
}

// GroupOf is the group of tenant name among n groups.
func GroupOf(name string, n int) int {
	if n <= 1 || name == tenant.Default || name == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

// For is the Node of the group of the tenant ctx carries, or, for a call
// forwarded from another node, of the group it names (WithGroup).
func (gs *Groups) For(ctx context.Context) *Node {
	if g, ok := GroupFrom(ctx); ok && g < len(gs.nodes) {
		return gs.nodes[g]
	}
	return gs.nodes[gs.GroupOf(tenant.From(ctx))]
}

// Placement is one row of the placement table, as /health and ctl show it.
type Placement struct {
	Tenant  string `json:"tenant"`
	Group   int    `json:"group"`
	Pinned  bool   `json:"pinned"`
	Written bool   `json:"written"` // its first write is recorded: the row never moves
}

// Placements is the placement table as this node's group 0 holds it.
func (gs *Groups) Placements() []Placement {
	var out []Placement
	_ = gs.nodes[0].fsm.Read(func(rd *fsm.Reader) error {
		for name, rec := range rd.Placements() {
			out = append(out, Placement{Tenant: name, Group: int(rec.Group), Pinned: rec.Pinned, Written: rec.Written})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// Placements of a Node: one group, no table.
func (n *Node) Placements() []Placement { return nil }

type groupKey struct{}

// WithGroup names the group a forwarded call is for.
func WithGroup(ctx context.Context, g int) context.Context {
	return context.WithValue(ctx, groupKey{}, g)
}

// GroupFrom is the group WithGroup named, if any.
func GroupFrom(ctx context.Context) (int, bool) {
	g, ok := ctx.Value(groupKey{}).(int)
	return g, ok
}

// Each runs fn on every group's Node, group 0 first.
func (gs *Groups) Each(fn func(*Node)) {
	for _, n := range gs.nodes {
		fn(n)
	}
}

// SetForwarder installs each group's client to its leader (of makes group
// g's: the forwarded call names its group).
func (gs *Groups) SetForwarder(of func(g int) Forwarder) {
	for g, n := range gs.nodes {
		n.SetForwarder(of(g))
	}
}

// Drain drains every group (each leader hands its leadership over).
func (gs *Groups) Drain() {
	gs.stopBalance()
	var wg sync.WaitGroup
	for _, n := range gs.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Drain() }()
	}
	wg.Wait()
}

func (gs *Groups) stopBalance() {
	gs.once.Do(func() { close(gs.stop) })
	gs.wg.Wait()
}

// Shutdown stops every group, group 0 (which owns gossip) last, then the
// Raft port.
func (gs *Groups) Shutdown() error {
	gs.stopBalance()
	var first error
	for i := len(gs.nodes) - 1; i >= 0; i-- {
		if err := gs.nodes[i].Shutdown(); err != nil && first == nil {
			first = err
		}
	}
	if gs.mux != nil {
		gs.mux.Close()
	}
	return first
}

// Kill stops every group as a crash would.
func (gs *Groups) Kill() {
	gs.stopBalance()
	for i := len(gs.nodes) - 1; i >= 0; i-- {
		gs.nodes[i].Kill()
	}
	if gs.mux != nil {
		gs.mux.Close()
	}
}

// balanceInterval is how often a node looks whether it leads a group
// another voter should lead.
const balanceInterval = 2 * time.Second
