package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth/authtest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// Locks over gRPC: the four operations, a semaphore, a same-owner retry,
// and the guard of an answer fencing a transaction.
func TestLocks(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	acquire := pb.LockOpKind_LOCK_OP_KIND_ACQUIRE
	one := func(op *pb.LockOp) *pb.LockResult {
		t.Helper()
		res, err := c.Locks(ctx, &pb.LocksRequest{Operations: []*pb.LockOp{op}})
		if err != nil || len(res.Results) != 1 {
			t.Fatalf("%v: %v %v", op, res, err)
		}
		return res.Results[0]
	}
	a := one(&pb.LockOp{Op: acquire, Name: "job", TtlSeconds: 30, Owner: proto.String("w1")})
	if !a.Ok || a.Op != "acquire" || a.Name != "job" || a.Index != 0 || a.Token == 0 || a.GetOwner() != "w1" || a.Guard == nil ||
		a.Guard.Op != pb.KvOpKind_KV_OP_KIND_CHECK || a.Guard.Ns != "queen-locks" || a.Guard.Key != "job#0" || a.Guard.GetExpect() != a.Token ||
		!a.Guard.Required || a.ExpiresAt.AsTime().Sub(a.Since.AsTime()).Seconds() != 30 {
		t.Fatalf("acquire: %v", a)
	}
	if r := one(&pb.LockOp{Op: acquire, Name: "job", TtlSeconds: 30, Owner: proto.String("w1")}); !r.Ok || !r.Already || r.Token != a.Token {
		t.Fatalf("the owner's retry: %v", r)
	}
	if r := one(&pb.LockOp{Op: acquire, Name: "job", TtlSeconds: 30, Owner: proto.String("w2")}); r.Ok || r.Reason != "held" ||
		len(r.Holders) != 1 || r.Holders[0].GetOwner() != "w1" {
		t.Fatalf("acquire of a held lock: %v", r)
	}
	guarded := func(guard *pb.KvOp) *pb.TransactionResponse {
		t.Helper()
		res, err := c.Transaction(ctx, &pb.TransactionRequest{Kv: []*pb.KvOp{guard,
			{Op: pb.KvOpKind_KV_OP_KIND_INCR, Ns: "jobs", Key: "runs", Forever: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := guarded(a.Guard); !r.Success {
		t.Fatalf("guarded transaction while held: %v", r)
	}
	rn := one(&pb.LockOp{Op: pb.LockOpKind_LOCK_OP_KIND_RENEW, Name: "job", Token: a.Token, TtlSeconds: 30})
	if !rn.Ok || rn.Token <= a.Token || !proto.Equal(rn.Since, a.Since) {
		t.Fatalf("renew: %v", rn)
	}
	if r := guarded(a.Guard); r.Success || r.Reason != "kv_precondition" {
		t.Fatalf("transaction with the guard before the renew: %v", r)
	}
	g := one(&pb.LockOp{Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: "job"})
	if !g.Ok || !g.Held || len(g.Holders) != 1 || g.Holders[0].Token != rn.Token {
		t.Fatalf("get: %v", g)
	}
	if r := one(&pb.LockOp{Op: pb.LockOpKind_LOCK_OP_KIND_RELEASE, Name: "job", Token: a.Token}); r.Ok || r.Reason != "lost" {
		t.Fatalf("release with a stale token: %v", r)
	}
	if r := one(&pb.LockOp{Op: pb.LockOpKind_LOCK_OP_KIND_RELEASE, Name: "job", Token: rn.Token}); !r.Ok {
		t.Fatalf("release: %v", r)
	}
	if r := guarded(rn.Guard); r.Success {
		t.Fatalf("transaction after the release: %v", r)
	}
	res, err := c.Locks(ctx, &pb.LocksRequest{Operations: []*pb.LockOp{
		{Op: acquire, Name: "gpu", TtlSeconds: 5, Limit: proto.Uint32(2), Owner: proto.String("a")},
		{Op: acquire, Name: "other", TtlSeconds: 5},
		{Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: "job"},
	}})
	if err != nil || len(res.Results) != 3 || !res.Results[0].Ok || !res.Results[1].Ok || res.Results[1].Owner != nil ||
		!res.Results[2].Ok || res.Results[2].Held || res.Results[2].Index != 2 {
		t.Fatalf("one call of three: %v %v", res, err)
	}
	if b := one(&pb.LockOp{Op: acquire, Name: "gpu", TtlSeconds: 5, Limit: proto.Uint32(2), Owner: proto.String("b")}); !b.Ok || b.Slot != 1 {
		t.Fatalf("second permit of two: %v", b)
	}
	if empty, err := c.Locks(ctx, &pb.LocksRequest{}); err != nil || len(empty.Results) != 0 {
		t.Fatalf("empty call: %v %v", empty, err)
	}
}

// The same refusals over both front ends: HTTP 400 and gRPC
// INVALID_ARGUMENT with the same reason, nothing written.
func TestLockRefusalParity(t *testing.T) {
	n, c, _ := dial(t)
	hash := stateHash(t, n)
	acq := pb.LockOpKind_LOCK_OP_KIND_ACQUIRE
	wide, wideJSON := []*pb.LockOp{}, []string{}
	for i := 0; i < 5; i++ {
		wide = append(wide, &pb.LockOp{Op: acq, Name: fmt.Sprint("s", i), TtlSeconds: 1, Limit: proto.Uint32(1024)})
		wideJSON = append(wideJSON, fmt.Sprintf(`{"op":"acquire","name":"s%d","ttlSeconds":1,"limit":1024}`, i))
	}
	many, manyJSON := []*pb.LockOp{}, []string{}
	for i := 0; i < 65; i++ {
		many = append(many, &pb.LockOp{Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: fmt.Sprint("l", i)})
		manyJSON = append(manyJSON, fmt.Sprintf(`{"op":"get","name":"l%d"}`, i))
	}
	cases := []struct {
		name, body, reason string
		ops                []*pb.LockOp
	}{
		{"no op", `[{"name":"a","ttlSeconds":1}]`, "locks_unknown_op", []*pb.LockOp{{Name: "a", TtlSeconds: 1}}},
		{"no name", `[{"op":"get"}]`, "locks_bad_name", []*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_GET}}},
		{"name with #", `[{"op":"get","name":"a#1"}]`, "locks_bad_name", []*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: "a#1"}}},
		{"name too long", `[{"op":"get","name":"` + strings.Repeat("x", 257) + `"}]`, "locks_bad_name",
			[]*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: strings.Repeat("x", 257)}}},
		{"no ttl", `[{"op":"acquire","name":"a"}]`, "locks_ttl_required", []*pb.LockOp{{Op: acq, Name: "a"}}},
		{"negative ttl", `[{"op":"acquire","name":"a","ttlSeconds":-1}]`, "locks_bad_ttl", []*pb.LockOp{{Op: acq, Name: "a", TtlSeconds: -1}}},
		{"empty owner", `[{"op":"acquire","name":"a","ttlSeconds":1,"owner":""}]`, "locks_bad_owner",
			[]*pb.LockOp{{Op: acq, Name: "a", TtlSeconds: 1, Owner: proto.String("")}}},
		{"limit 0", `[{"op":"acquire","name":"a","ttlSeconds":1,"limit":0}]`, "locks_bad_limit",
			[]*pb.LockOp{{Op: acq, Name: "a", TtlSeconds: 1, Limit: proto.Uint32(0)}}},
		{"limit 1025", `[{"op":"acquire","name":"a","ttlSeconds":1,"limit":1025}]`, "locks_bad_limit",
			[]*pb.LockOp{{Op: acq, Name: "a", TtlSeconds: 1, Limit: proto.Uint32(1025)}}},
		{"release without token", `[{"op":"release","name":"a"}]`, "locks_token_required",
			[]*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_RELEASE, Name: "a"}}},
		{"slot 1024", `[{"op":"release","name":"a","token":3,"slot":1024}]`, "locks_bad_slot",
			[]*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_RELEASE, Name: "a", Token: 3, Slot: proto.Uint32(1024)}}},
		{"one lock twice", `[{"op":"acquire","name":"a","ttlSeconds":1},{"op":"get","name":"a"}]`, "locks_duplicate_in_call",
			[]*pb.LockOp{{Op: acq, Name: "a", TtlSeconds: 1}, {Op: pb.LockOpKind_LOCK_OP_KIND_GET, Name: "a"}}},
		{"65 ops", "[" + strings.Join(manyJSON, ",") + "]", "locks_too_many_ops", many},
		{"4,097 slots", "[" + strings.Join(wideJSON, ",") + "]", "locks_too_many_keys", wide},
	}
	for _, tc := range cases {
		before := hash()
		code, body := post(t, n.HTTPURL+"/api/v1/locks", tc.body)
		if code != 400 || body["error"] != "locks_bad_request" || body["reason"] != tc.reason {
			t.Errorf("%s over HTTP: %d %v, want 400 %s", tc.name, code, body, tc.reason)
		}
		call := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5e9)
			defer cancel()
			_, err := c.Locks(ctx, &pb.LocksRequest{Operations: tc.ops})
			return err
		}
		st, _ := status.FromError(call())
		if st.Code() != codes.InvalidArgument || reasonOf(st) != tc.reason {
			t.Errorf("%s over gRPC: %v (reason %q), want INVALID_ARGUMENT %s", tc.name, st, reasonOf(st), tc.reason)
		}
		if !authtest.Unchanged(hash, before, func() { call(); post(t, n.HTTPURL+"/api/v1/locks", tc.body) }) {
			t.Errorf("%s: refused, and the state changed", tc.name)
		}
	}
}
