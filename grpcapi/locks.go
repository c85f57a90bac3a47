package grpcapi

import (
	"context"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/locks"
	"github.com/queen-node/queen-node/request"
)

// Locks (addendum §4.3) over gRPC: the rules of POST /api/v1/locks
// (package request), one entry per call.
func (s *Public) Locks(ctx context.Context, in *queenpb.LocksRequest) (*queenpb.LocksResponse, error) {
	idem, err := s.keyOf(ctx, in)
	if err != nil {
		return nil, publicStatus(err)
	}
	ops, err := request.Locks(lockOps(in.Operations))
	if err != nil {
		return nil, s.refuse(ctx, idem, err)
	}
	out := &queenpb.LocksResponse{Results: make([]*queenpb.LockResult, 0, len(ops))}
	if len(ops) == 0 {
		return out, nil
	}
	res, err := propose[*command.LocksResult](s, ctx, idem, &command.Command{Body: &command.Command_Locks{Locks: &command.Locks{Ops: ops}}})
	if err != nil {
		return nil, err
	}
	if e := request.LocksVerdict(res); e != nil {
		return nil, publicStatus(e)
	}
	for i, r := range res.Results {
		out.Results = append(out.Results, lockResultOut(i, r))
	}
	return out, nil
}

var lockOpNames = map[queenpb.LockOpKind]string{
	queenpb.LockOpKind_LOCK_OP_KIND_ACQUIRE: "acquire", queenpb.LockOpKind_LOCK_OP_KIND_RENEW: "renew",
	queenpb.LockOpKind_LOCK_OP_KIND_RELEASE: "release", queenpb.LockOpKind_LOCK_OP_KIND_GET: "get",
}

// lockOps is the wire's ops as the rules read them. A field proto3 cannot
// leave unset counts as sent when it is not zero.
func lockOps(in []*queenpb.LockOp) []request.LockOp {
	out := make([]request.LockOp, len(in))
	for i, op := range in {
		if op == nil {
			continue // no kind: refused as an unknown op
		}
		o := request.LockOp{
			Op: lockOpNames[op.Op], Name: op.Name, HasName: op.Name != "",
			Owner: op.GetOwner(), HasOwner: op.Owner != nil,
			Limit: int64(op.GetLimit()), HasLimit: op.Limit != nil,
			TTL: op.TtlSeconds, HasTTL: op.TtlSeconds != 0,
			Slot: int64(op.GetSlot()), HasSlot: op.Slot != nil,
			Token: int64(min(op.Token, 1<<63-1)), HasToken: op.Token != 0,
		}
		if o.Op == "" {
			o.Op = op.Op.String()
		}
		out[i] = o
	}
	return out
}

func lockResultOut(i int, r *command.LockResult) *queenpb.LockResult {
	out := &queenpb.LockResult{Index: uint32(i), Op: request.LockOpName(r.Kind), Name: r.Name, Ok: r.Ok,
		Slot: r.Slot, At: stamp(r.AtUs)}
	switch r.Reason {
	case command.LockResult_HELD:
		out.Reason = "held"
	case command.LockResult_LOST:
		out.Reason = "lost"
	}
	granted := r.Ok && (r.Kind == command.LockOp_ACQUIRE || r.Kind == command.LockOp_RENEW)
	if granted {
		g := locks.Guard(r.Name, r.Slot, r.Token)
		expect := g.Expect
		out.Token, out.Already = r.Token, r.Already
		out.Guard = &queenpb.KvOp{Op: queenpb.KvOpKind_KV_OP_KIND_CHECK, Ns: g.Ns, Key: g.Key, Expect: &expect, Required: true}
		out.Since, out.ExpiresAt = stamp(r.SinceUs), stamp(r.ExpiresUs)
	}
	if r.Owner != "" && (granted || r.Kind == command.LockOp_RELEASE && r.Ok) {
		owner := r.Owner
		out.Owner = &owner
	}
	if r.Kind == command.LockOp_RELEASE && r.Ok {
		out.Token = r.Token
	}
	out.Held = r.Kind == command.LockOp_GET && len(r.Holders) > 0
	for _, h := range r.Holders {
		lh := &queenpb.LockHolder{Slot: h.Slot, Token: h.Token, Since: stamp(h.SinceUs), RenewedAt: stamp(h.RenewedUs),
			ExpiresAt: stamp(h.ExpiresUs)}
		if h.HasOwner {
			owner := h.Owner
			lh.Owner = &owner
		}
		out.Holders = append(out.Holders, lh)
	}
	return out
}
