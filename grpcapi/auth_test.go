package grpcapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/tlsfiles"
)

const grpcSecret = "a-test-secret-of-enough-length-32b"

func grpcToken(t *testing.T, sub, role string, exp time.Duration) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(grpcSecret)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"sub": sub, "role": role, "exp": time.Now().Add(exp).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startWithJWT starts a node with JWT on (HS256, grpcSecret) and dials it.
func startWithJWT(t *testing.T) (*grpctest.Node, *grpc.ClientConn) {
	return startWithJWTConfig(t, auth.Config{}, nil)
}

// startWithJWTConfig starts a node with JWT on (c, with HS256 and
// grpcSecret) and, when peer is set, peer TLS on its gRPC port; the
// connection it returns is plain gRPC (nil with peer TLS).
func startWithJWTConfig(t *testing.T, c auth.Config, peer *tlsfiles.Peer) (*grpctest.Node, *grpc.ClientConn) {
	t.Helper()
	c.Enabled, c.Secret = true, grpcSecret
	v, err := auth.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	n := grpctest.Start(t, grpctest.Options{Auth: v, PeerTLS: peer})
	if peer != nil {
		return n, nil
	}
	conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return n, conn
}

// The same tokens and levels on gRPC, in per-call metadata.
func TestGRPCTokensAndLevels(t *testing.T) {
	_, conn := startWithJWT(t)
	var err error
	c := pb.NewQueenClient(conn)
	ctx := ctxT(t)
	as := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	expect := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if st := status.Convert(err); st.Code() != code || (msg != "" && st.Message() != msg) {
			t.Fatalf("%s: %v, want %v %q", what, err, code, msg)
		}
	}
	push := &pb.PushRequest{Items: []*pb.PushItem{{Queue: "gq", TransactionId: "g1"}}}
	_, err = c.Push(ctx, push)
	expect("push without a token", err, codes.Unauthenticated, "Authentication required")
	_, err = c.Push(as(grpcToken(t, "x", "admin", -time.Hour)), push)
	expect("expired", err, codes.Unauthenticated, "Token has expired")
	_, err = c.Push(as(grpcToken(t, "reader", "read-only", time.Hour)), push)
	expect("read-only push", err, codes.PermissionDenied, "Insufficient permissions")
	wo := as(grpcToken(t, "checkout", "write-only", time.Hour))
	_, err = c.Push(wo, push)
	expect("write-only push", err, codes.OK, "")
	_, err = c.Pop(wo, &pb.PopRequest{Queue: "gq"})
	expect("write-only pop", err, codes.PermissionDenied, "Insufficient permissions")
	_, err = c.CancelTimer(wo, &pb.CancelTimerRequest{Queue: "gq", TimerKey: "k"})
	expect("write-only cancel", err, codes.PermissionDenied, "Insufficient permissions")
	rw := as(grpcToken(t, "charger", "read-write", time.Hour))
	pop, err := c.Pop(rw, &pb.PopRequest{Queue: "gq"})
	expect("read-write pop", err, codes.OK, "")
	if len(pop.Messages) != 1 || pop.Messages[0].ProducerSub != "checkout" {
		t.Fatalf("producerSub on gRPC: %v", pop)
	}
	_, err = c.DeleteQueue(rw, &pb.DeleteQueueRequest{Queue: "gq"})
	expect("read-write delete", err, codes.PermissionDenied, "Insufficient permissions")
	_, err = c.DeleteQueue(as(grpcToken(t, "ops", "admin", time.Hour)), &pb.DeleteQueueRequest{Queue: "gq"})
	expect("admin delete", err, codes.OK, "")
	// A queues claim limits a token beyond its role.
	sc, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(grpcSecret)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	scoped, _ := jwt.Signed(sc).Claims(map[string]any{"sub": "refunds", "role": "read-write", "queues": []string{"refunds."},
		"exp": time.Now().Add(time.Hour).Unix()}).Serialize()
	_, err = c.Push(as(scoped), &pb.PushRequest{Items: []*pb.PushItem{{Queue: "payments.x"}}})
	expect("scoped push elsewhere", err, codes.PermissionDenied, "Insufficient permissions")
	_, err = c.Pop(as(scoped), &pb.PopRequest{Queue: "payments.x"})
	expect("scoped pop elsewhere", err, codes.PermissionDenied, "Insufficient permissions")
	_, err = c.Push(as(scoped), &pb.PushRequest{Items: []*pb.PushItem{{Queue: "refunds.x"}}})
	expect("scoped push in scope", err, codes.OK, "")
	// Streams too; health needs no token.
	stream, err := c.Consume(ctx, &pb.ConsumeRequest{Pop: &pb.PopRequest{Queue: "gq"}})
	if err == nil {
		_, err = stream.Recv()
	}
	expect("consume without a token", err, codes.Unauthenticated, "Authentication required")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
}
