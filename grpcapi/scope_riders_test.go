package grpcapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The auth matrix of riders over gRPC (issue 21), as on HTTP: a token
// scoped to "refunds." reaching another team's queue or namespace through
// any rider of a transaction (ack, push, kv, timer, position), through
// Locks, or through another team's lease is PERMISSION_DENIED and the
// state hash does not move; the same call wholly in scope is let through.
func TestGRPCScopedTokensReachNoRiderOutsideTheirScope(t *testing.T) {
	n, conn := startWithJWT(t)
	c := pb.NewQueenClient(conn)
	hash := stateHash(t, n)
	as := func(claims map[string]any) context.Context {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(grpcSecret)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		claims["exp"] = time.Now().Add(time.Hour).Unix()
		tok, err := jwt.Signed(s).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	admin := as(map[string]any{"sub": "ops", "role": "admin"})
	refunds := as(map[string]any{"sub": "refunds", "role": "read-write", "queues": []string{"refunds."}})
	leased := func(ctx context.Context, queue string) *pb.Message {
		t.Helper()
		if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: queue, Payload: []byte(`{"n":1}`)}}}); err != nil {
			t.Fatalf("push %s: %v", queue, err)
		}
		r, err := c.Pop(ctx, &pb.PopRequest{Queue: queue, Batch: 1})
		if err != nil || len(r.Messages) != 1 {
			t.Fatalf("pop %s: %v %v", queue, r, err)
		}
		return r.Messages[0]
	}
	theirs, ours := leased(admin, "orders"), leased(refunds, "refunds.orders")
	ack := func(m *pb.Message) *pb.TransactionOp {
		return &pb.TransactionOp{Op: &pb.TransactionOp_Ack{Ack: &pb.AckRequest{TransactionId: m.TransactionId,
			PartitionId: m.PartitionId, LeaseId: m.LeaseId, Status: pb.AckStatus_ACK_STATUS_COMPLETED}}}
	}
	push := func(q string) *pb.TransactionOp {
		return &pb.TransactionOp{Op: &pb.TransactionOp_Push{Push: &pb.PushItem{Queue: q, Payload: []byte(`{"x":1}`)}}}
	}
	kv := func(ns string) []*pb.KvOp {
		return []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_PUT, Ns: ns, Key: "k", Value: []byte("1"), Forever: true}}
	}
	timer := func(q string) []*pb.TimerOp {
		return []*pb.TimerOp{{Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: q, TimerKey: "t1", DelayMs: proto.Float64(60000), Txn: "x1", Payload: []byte("{}")}}
	}
	position := func(q string) []*pb.Position {
		return []*pb.Position{{Queue: q, ConsumerGroup: "billing", Forget: true}}
	}
	txn := func(r *pb.TransactionRequest) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			res, err := c.Transaction(ctx, r)
			return res.GetSuccess(), err
		}
	}
	base := func(ops ...*pb.TransactionOp) *pb.TransactionRequest {
		return &pb.TransactionRequest{Operations: append([]*pb.TransactionOp{push("refunds.orders")}, ops...)}
	}
	with := func(r *pb.TransactionRequest, f func(*pb.TransactionRequest)) *pb.TransactionRequest { f(r); return r }
	cases := []struct {
		name             string
		outside, inScope func(context.Context) (bool, error)
	}{
		{"ack rider", txn(base(ack(theirs))), txn(base(ack(ours)))},
		{"push rider", txn(base(push("orders"))), txn(base(push("refunds.audit")))},
		{"kv rider", txn(with(base(), func(r *pb.TransactionRequest) { r.Kv = kv("charges") })),
			txn(with(base(), func(r *pb.TransactionRequest) { r.Kv = kv("refunds.charges") }))},
		{"timer rider", txn(with(base(), func(r *pb.TransactionRequest) { r.Timers = timer("orders") })),
			txn(with(base(), func(r *pb.TransactionRequest) { r.Timers = timer("refunds.orders") }))},
		{"position rider", txn(with(base(), func(r *pb.TransactionRequest) { r.Positions = position("orders") })),
			txn(with(base(), func(r *pb.TransactionRequest) { r.Positions = position("refunds.orders") }))},
		{"locks", func(ctx context.Context) (bool, error) {
			_, err := c.Locks(ctx, &pb.LocksRequest{Operations: []*pb.LockOp{{Op: pb.LockOpKind_LOCK_OP_KIND_ACQUIRE, Name: "daily", TtlSeconds: 30}}})
			return err == nil, err
		}, nil},
		{"another team's lease", func(ctx context.Context) (bool, error) {
			r, err := c.ExtendLease(ctx, &pb.ExtendLeaseRequest{LeaseId: theirs.LeaseId, Seconds: 60})
			return r.GetSuccess(), err
		}, nil},
	}
	for _, tc := range cases {
		before := hash()
		if _, err := tc.outside(refunds); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PERMISSION_DENIED", tc.name, err)
		}
		if after := hash(); after != before {
			t.Errorf("%s: refused, but the state changed", tc.name)
		}
		if tc.inScope != nil {
			if ok, err := tc.inScope(refunds); err != nil || !ok {
				t.Errorf("%s, wholly in scope: %v %v", tc.name, ok, err)
			}
		}
	}
	if ok, err := txn(&pb.TransactionRequest{Operations: []*pb.TransactionOp{ack(theirs)}, Positions: position("orders")})(admin); err != nil || !ok {
		t.Fatalf("an unscoped token's transaction: %v %v", ok, err)
	}
}
