package kafka

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/tenant"
)

// leadership is which tenants' Raft groups this node leads, as a test sets it.
type leadership struct {
	mu    sync.Mutex
	leads map[string]bool
}

func (l *leadership) set(name string, leads bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leads[name] = leads
}

func (l *leadership) isLeader(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leads[tenant.From(ctx)]
}

func joinV0(t *testing.T, g *coordinator, ctx context.Context, group string) *kmsg.JoinGroupResponse {
	t.Helper()
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 0 // no KIP-394 round trip: the member id is made here
	r.Group, r.SessionTimeoutMillis, r.ProtocolType = group, 10_000, "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a join held longer is answered REBALANCE_IN_PROGRESS
	defer cancel()
	return g.join(ctx, r)
}

// Two tenants' groups of one name are two groups, each coordinated as long
// as this node leads that tenant's Raft group: a member of one is unknown
// to the other, each lists its own, and losing one tenant's leadership
// forgets that tenant's groups only.
func TestCoordinatorKeysGroupsByTenant(t *testing.T) {
	l := &leadership{leads: map[string]bool{"acme": true}}
	g := newCoordinator(l.isLeader, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	defer close(done)
	go g.run(done) // ends join phases (the initial delay), expires sessions
	acme, globex := tenant.With(context.Background(), "acme"), tenant.With(context.Background(), "globex")

	if r := joinV0(t, g, globex, "billing"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("globex joins where this node does not lead its group: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	l.set("globex", true)
	a := joinV0(t, g, acme, "billing")
	b := joinV0(t, g, globex, "billing")
	for _, r := range []*kmsg.JoinGroupResponse{a, b} {
		if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 {
			t.Fatalf("join: %v generation %d leader %s member %s, %d members; want each its own group's one member",
				kerr.ErrorForCode(r.ErrorCode), r.Generation, r.LeaderID, r.MemberID, len(r.Members))
		}
	}
	for _, c := range []struct {
		ctx context.Context
		r   *kmsg.JoinGroupResponse
	}{{acme, a}, {globex, b}} { // each leader assigns its own group
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Group, sr.MemberID, sr.Generation = "billing", c.r.MemberID, c.r.Generation
		sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: c.r.MemberID, MemberAssignment: []byte(tenant.From(c.ctx))}}
		if resp := g.sync(c.ctx, sr); resp.ErrorCode != 0 || string(resp.MemberAssignment) != tenant.From(c.ctx) {
			t.Fatalf("%s's sync: %v, assignment %q", tenant.From(c.ctx), kerr.ErrorForCode(resp.ErrorCode), resp.MemberAssignment)
		}
	}
	if code := g.checkGeneration(globex, "billing", a.MemberID, a.Generation); code != kerr.UnknownMemberID.Code {
		t.Fatalf("acme's member commits to globex's billing: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	if code := g.checkGeneration(acme, "billing", a.MemberID, a.Generation); code != 0 {
		t.Fatalf("acme's member commits to its billing: %v", kerr.ErrorForCode(code))
	}
	for _, ctx := range []context.Context{acme, globex} {
		if st := g.states(ctx); len(st) != 1 || st[0].Group != "billing" {
			t.Fatalf("%s lists %v, want its billing", tenant.From(ctx), st)
		}
	}
	if st := g.states(tenant.With(context.Background(), tenant.Default)); len(st) != 0 {
		t.Fatalf("the default tenant lists %v", st)
	}

	// acme's group moves to another node's leadership: only acme's is
	// forgotten.
	l.set("acme", false)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "billing", a.MemberID, a.Generation
	if r := g.heartbeat(acme, hb); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("acme's heartbeat after its leadership moved: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.MemberID, hb.Generation = b.MemberID, b.Generation
	if r := g.heartbeat(globex, hb); r.ErrorCode != 0 {
		t.Fatalf("globex's heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if st := g.states(acme); len(st) != 0 {
		t.Fatalf("acme still lists %v", st)
	}
	if st := g.states(globex); len(st) != 1 {
		t.Fatalf("globex lists %v, want its billing", st)
	}
}
