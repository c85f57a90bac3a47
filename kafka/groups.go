package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/tenant"
)

// The classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup; client-side assignors), held in memory by the coordinating
// node, the leader of the tenant's Raft group. A group is a tenant's: the
// coordinator keys it by (tenant, name), so two tenants' groups of one
// name are two groups. Offsets are not here: they are Queen positions,
// committed through the log (offsets.go). When this node stops leading a
// tenant's group it forgets that tenant's members: after a failover
// members are unknown to the new coordinator, rejoin and resume from the
// committed offsets.

// initialRebalanceDelay lets members that start together land in one
// generation (Kafka's group.initial.rebalance.delay.ms, shorter here).
const initialRebalanceDelay = 300 * time.Millisecond

const (
	statePreparing  = "PreparingRebalance"
	stateCompleting = "CompletingRebalance"
	stateStable     = "Stable"
	stateEmpty      = "Empty"
	stateDead       = "Dead"
)

type member struct {
	id, instance, clientID, host string
	protocols                    []kmsg.JoinGroupRequestProtocol
	session, rebalance           time.Duration
	deadline                     time.Time
	joined                       bool // rejoined in the rebalance under way
	assignment                   []byte
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// round is one rebalance's join phase or sync phase: waiters hold it and
// read its outcome once done is closed.
type round struct {
	done       chan struct{}
	aborted    bool
	generation int32
	protocol   string
	leader     string
	members    []kmsg.JoinGroupResponseMember
	deadline   time.Time // the join phase ends by then
	earliest   time.Time // and not before (the initial delay)
}

func newRound() *round { return &round{done: make(chan struct{})} }

// groupID names a consumer group: its tenant and its name.
type groupID struct{ tenant, name string }

type group struct {
	tenant                                      string
	name, state, protocolType, protocol, leader string
	generation                                  int32
	members                                     map[string]*member
	order                                       []string // join order: the leader is chosen from it
	pending                                     map[string]time.Time
	join, sync                                  *round
}

type groupState struct{ Group, State, ProtocolType string }

type coordinator struct {
	isLeader func(ctx context.Context) bool // of the tenant ctx carries
	log      *slog.Logger
	mu       sync.Mutex
	groups   map[groupID]*group
}

func newCoordinator(isLeader func(ctx context.Context) bool, log *slog.Logger) *coordinator {
	return &coordinator{isLeader: isLeader, log: log, groups: map[groupID]*group{}}
}

// leading reports whether this node coordinates the groups of the tenant
// ctx carries; when it does not, that tenant's groups are forgotten (held
// calls are released).
func (g *coordinator) leading(ctx context.Context) bool {
	if g.isLeader(ctx) {
		return true
	}
	g.forget(tenant.From(ctx))
	return false
}

// forget drops every group of tenant name.
func (g *coordinator) forget(name string) {
	for id, gr := range g.groups {
		if id.tenant == name {
			gr.abort()
			delete(g.groups, id)
		}
	}
}

// tenants are the tenants that have a group here.
func (g *coordinator) tenants() []string {
	seen := map[string]bool{}
	var out []string
	for id := range g.groups {
		if !seen[id.tenant] {
			seen[id.tenant] = true
			out = append(out, id.tenant)
		}
	}
	return out
}

func (gr *group) abort() {
	for _, r := range []*round{gr.join, gr.sync} {
		if r != nil {
			select {
			case <-r.done:
			default:
				r.aborted = true
				close(r.done)
			}
		}
	}
}

func (g *coordinator) run(done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			g.mu.Lock()
			for _, gr := range g.groups {
				gr.abort()
			}
			g.mu.Unlock()
			return
		case <-t.C:
		}
		// each tenant's groups as long as this node leads that tenant's
		// Raft group (asked with a ctx of that tenant)
		g.mu.Lock()
		leads := map[string]bool{}
		for _, name := range g.tenants() {
			leads[name] = g.leading(tenantCtx(name))
		}
		now := time.Now()
		for id, gr := range g.groups {
			if leads[id.tenant] {
				g.expire(gr, now)
			}
		}
		g.mu.Unlock()
	}
}

// expire removes members whose session ran out and ends a join phase past
// its deadline.
func (g *coordinator) expire(gr *group, now time.Time) {
	for id, t := range gr.pending {
		if now.Sub(t) > time.Minute {
			delete(gr.pending, id)
		}
	}
	gone := false
	for id, m := range gr.members {
		if now.After(m.deadline) && !(gr.state == statePreparing && m.joined) {
			g.log.Info("kafka: a group member's session timed out", "tenant", gr.tenant, "group", gr.name, "member", id)
			gr.remove(id)
			gone = true
		}
	}
	if gone {
		gr.rebalance(now)
	}
	if gr.state == statePreparing {
		g.maybeComplete(gr, now)
	}
}

func (gr *group) remove(id string) {
	delete(gr.members, id)
	for i, o := range gr.order {
		if o == id {
			gr.order = append(gr.order[:i], gr.order[i+1:]...)
			break
		}
	}
}

// rebalance starts a join phase (one under way goes on).
func (gr *group) rebalance(now time.Time) {
	if len(gr.members) == 0 {
		gr.abort()
		gr.state, gr.join, gr.sync = stateEmpty, nil, nil
		gr.generation++
		return
	}
	if gr.state == statePreparing {
		return
	}
	if gr.sync != nil {
		gr.sync.aborted = true
		select {
		case <-gr.sync.done:
		default:
			close(gr.sync.done)
		}
		gr.sync = nil
	}
	wasEmpty := gr.state == stateEmpty
	gr.state = statePreparing
	gr.join = newRound()
	longest := time.Duration(0)
	for _, m := range gr.members {
		m.joined = false
		longest = max(longest, m.rebalance)
	}
	gr.join.deadline = now.Add(longest)
	if wasEmpty {
		gr.join.earliest = now.Add(initialRebalanceDelay)
	}
}

// maybeComplete ends the join phase when every member rejoined (and the
// initial delay passed) or its deadline passed: members that did not
// rejoin are out, a generation begins.
func (g *coordinator) maybeComplete(gr *group, now time.Time) {
	all := true
	for _, m := range gr.members {
		all = all && m.joined
	}
	if !(all && !now.Before(gr.join.earliest)) && now.Before(gr.join.deadline) {
		return
	}
	for id, m := range gr.members {
		if !m.joined {
			gr.remove(id)
		}
	}
	r := gr.join
	gr.generation++
	if len(gr.members) == 0 {
		gr.state, gr.join = stateEmpty, nil
		r.aborted = true
		close(r.done)
		return
	}
	if _, ok := gr.members[gr.leader]; !ok {
		gr.leader = gr.order[0]
	}
	gr.protocol = ""
	for _, p := range gr.members[gr.leader].protocols {
		every := true
		for _, m := range gr.members {
			every = every && m.metadata(p.Name) != nil
		}
		if every {
			gr.protocol = p.Name
			break
		}
	}
	r.generation, r.protocol, r.leader = gr.generation, gr.protocol, gr.leader
	for _, id := range gr.order {
		m := gr.members[id]
		m.assignment = nil
		r.members = append(r.members, kmsg.JoinGroupResponseMember{MemberID: id, InstanceID: optional(m.instance), ProtocolMetadata: m.metadata(gr.protocol)})
	}
	gr.state, gr.join, gr.sync = stateCompleting, nil, newRound()
	close(r.done)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newMemberID(clientID string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return clientID + "-" + hex.EncodeToString(b)
}

func (g *coordinator) join(ctx context.Context, r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	fail := func(code int16) *kmsg.JoinGroupResponse { resp.ErrorCode = code; return resp }
	g.mu.Lock()
	if !g.leading(ctx) {
		g.mu.Unlock()
		return fail(kerr.NotCoordinator.Code)
	}
	switch {
	case validGroup(r.Group) != "":
		g.mu.Unlock()
		return fail(kerr.InvalidGroupID.Code)
	case r.SessionTimeoutMillis < 1000 || r.SessionTimeoutMillis > 300_000:
		g.mu.Unlock()
		return fail(kerr.InvalidSessionTimeout.Code)
	case len(r.Protocols) == 0 || r.ProtocolType == "":
		g.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	key := groupID{tenant.From(ctx), r.Group}
	gr := g.groups[key]
	if gr == nil {
		gr = &group{tenant: key.tenant, name: r.Group, state: stateEmpty, members: map[string]*member{}, pending: map[string]time.Time{}}
		g.groups[key] = gr
	}
	if len(gr.members) > 0 && gr.protocolType != r.ProtocolType {
		g.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	id := r.MemberID
	now := time.Now()
	if id == "" {
		id = newMemberID(clientIDOf(ctx))
		if r.Version >= 4 { // KIP-394: the member comes back with its id
			gr.pending[id] = now
			resp.MemberID = id
			g.mu.Unlock()
			return fail(kerr.MemberIDRequired.Code)
		}
	} else if _, known := gr.members[id]; !known {
		if _, pending := gr.pending[id]; !pending {
			g.mu.Unlock()
			resp.MemberID = id
			return fail(kerr.UnknownMemberID.Code)
		}
	}
	delete(gr.pending, id)
	m := gr.members[id]
	if m == nil {
		m = &member{id: id}
		gr.members[id] = m
		gr.order = append(gr.order, id)
	}
	m.protocols = r.Protocols
	m.session = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	m.rebalance = m.session
	if r.Version >= 1 && r.RebalanceTimeoutMillis > 0 {
		m.rebalance = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.InstanceID != nil {
		m.instance = *r.InstanceID
	}
	m.deadline = now.Add(m.session)
	gr.protocolType = r.ProtocolType
	gr.rebalance(now)
	m.joined = true
	g.maybeComplete(gr, now)
	rd := gr.join
	if rd == nil { // completed by this join: find its round through the sync phase
		rd = g.lastJoin(gr)
	}
	g.mu.Unlock()
	select {
	case <-rd.done:
	case <-ctx.Done():
		return fail(kerr.RebalanceInProgress.Code)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m.deadline = time.Now().Add(m.session)
	if rd.aborted || gr.members[id] == nil {
		resp.MemberID = id
		if !g.leading(ctx) {
			return fail(kerr.NotCoordinator.Code)
		}
		return fail(kerr.UnknownMemberID.Code)
	}
	if rd.protocol == "" {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	resp.Generation, resp.Protocol, resp.LeaderID, resp.MemberID = rd.generation, kmsg.StringPtr(rd.protocol), rd.leader, id
	resp.ProtocolType = kmsg.StringPtr(gr.protocolType)
	if id == rd.leader {
		resp.Members = rd.members
	}
	return resp
}

// lastJoin is the round the group's last join phase completed: its
// outcome as a closed round.
func (g *coordinator) lastJoin(gr *group) *round {
	r := newRound()
	r.generation, r.protocol, r.leader = gr.generation, gr.protocol, gr.leader
	for _, id := range gr.order {
		m := gr.members[id]
		r.members = append(r.members, kmsg.JoinGroupResponseMember{MemberID: id, InstanceID: optional(m.instance), ProtocolMetadata: m.metadata(gr.protocol)})
	}
	close(r.done)
	return r
}

// known finds the member a call names (a group of the tenant ctx
// carries), refreshing its session; code is the Kafka error when it
// cannot go on.
func (g *coordinator) known(ctx context.Context, name, id string, generation int32) (*group, *member, int16) {
	if !g.leading(ctx) {
		return nil, nil, kerr.NotCoordinator.Code
	}
	gr := g.groups[groupID{tenant.From(ctx), name}]
	if gr == nil || gr.members[id] == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	m := gr.members[id]
	m.deadline = time.Now().Add(m.session)
	if generation != gr.generation {
		return gr, m, kerr.IllegalGeneration.Code
	}
	return gr, m, 0
}

func (g *coordinator) sync(ctx context.Context, r *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	g.mu.Lock()
	gr, m, code := g.known(ctx, r.Group, r.MemberID, r.Generation)
	if code == 0 && gr.state == statePreparing {
		code = kerr.RebalanceInProgress.Code
	}
	if code == 0 && r.ProtocolType != nil && *r.ProtocolType != gr.protocolType {
		code = kerr.InconsistentGroupProtocol.Code
	}
	if code != 0 {
		g.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	if gr.state == stateCompleting && r.MemberID == gr.leader {
		for _, a := range r.GroupAssignment {
			if am := gr.members[a.MemberID]; am != nil {
				am.assignment = a.MemberAssignment
			}
		}
		gr.state = stateStable
		close(gr.sync.done)
	}
	rd := gr.sync
	g.mu.Unlock()
	if rd != nil {
		select {
		case <-rd.done:
		case <-ctx.Done():
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return resp
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if rd != nil && rd.aborted || gr.members[r.MemberID] == nil || gr.generation != r.Generation {
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	}
	resp.MemberAssignment = m.assignment
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(gr.protocolType), kmsg.StringPtr(gr.protocol)
	return resp
}

func (g *coordinator) heartbeat(ctx context.Context, r *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, _, code := g.known(ctx, r.Group, r.MemberID, r.Generation)
	if code == 0 && gr.state == statePreparing {
		code = kerr.RebalanceInProgress.Code // how members learn to rejoin
	}
	resp.ErrorCode = code
	return resp
}

func (g *coordinator) leave(ctx context.Context, r *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.leading(ctx) {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	gr := g.groups[groupID{tenant.From(ctx), r.Group}]
	ids := []string{r.MemberID}
	if r.Version >= 3 {
		ids = ids[:0]
		for _, m := range r.Members {
			ids = append(ids, m.MemberID)
		}
	}
	left := false
	for _, id := range ids {
		code := int16(0)
		if gr == nil || gr.members[id] == nil {
			code = kerr.UnknownMemberID.Code
		} else {
			gr.remove(id)
			left = true
		}
		if r.Version >= 3 {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: id, ErrorCode: code})
		} else {
			resp.ErrorCode = code
		}
	}
	if left {
		now := time.Now()
		if gr.state == statePreparing && len(gr.members) > 0 {
			g.maybeComplete(gr, now)
		} else {
			gr.rebalance(now)
		}
	}
	return resp
}

func (g *coordinator) describe(ctx context.Context, r *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	g.mu.Lock()
	defer g.mu.Unlock()
	leading := g.leading(ctx)
	for _, name := range r.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group, d.State = name, stateDead
		gr := g.groups[groupID{tenant.From(ctx), name}]
		switch {
		case !leading:
			d.ErrorCode = kerr.NotCoordinator.Code
		case gr != nil:
			d.State, d.ProtocolType, d.Protocol = gr.state, gr.protocolType, gr.protocol
			for _, id := range gr.order {
				m := gr.members[id]
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = id, optional(m.instance), m.clientID, m.host
				dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(gr.protocol), m.assignment
				d.Members = append(d.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

// checkGeneration is what an OffsetCommit must pass, Kafka's rules: a
// simple commit (generation -1, no member) only to a group without
// members; otherwise a known member of the current generation, in a
// Stable group or one preparing a rebalance (members commit before they
// rejoin). The group is the tenant's ctx carries.
func (g *coordinator) checkGeneration(ctx context.Context, name, id string, generation int32) int16 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.leading(ctx) {
		return kerr.NotCoordinator.Code
	}
	gr := g.groups[groupID{tenant.From(ctx), name}]
	if generation < 0 && id == "" {
		if gr != nil && len(gr.members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	if gr == nil || gr.members[id] == nil {
		return kerr.UnknownMemberID.Code
	}
	switch {
	case generation != gr.generation:
		return kerr.IllegalGeneration.Code
	case gr.state == stateCompleting:
		return kerr.RebalanceInProgress.Code
	}
	gr.members[id].deadline = time.Now().Add(gr.members[id].session)
	return 0
}

// states are the groups of the tenant ctx carries.
func (g *coordinator) states(ctx context.Context) []groupState {
	g.mu.Lock()
	defer g.mu.Unlock()
	name := tenant.From(ctx)
	var out []groupState
	for id, gr := range g.groups {
		if id.tenant == name {
			out = append(out, groupState{Group: gr.name, State: gr.state, ProtocolType: gr.protocolType})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// drop forgets an empty group of the tenant ctx carries.
func (g *coordinator) drop(ctx context.Context, name string) int16 {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := groupID{tenant.From(ctx), name}
	if gr := g.groups[key]; gr != nil {
		if len(gr.members) > 0 {
			return kerr.NonEmptyGroup.Code
		}
		delete(g.groups, key)
	}
	return 0
}
