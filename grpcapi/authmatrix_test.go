package grpcapi_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
	"github.com/queen-node/queen-node/grpcapi/internalpb"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/tlsfiles"
	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

// The auth matrix on gRPC: every queen.v1 method × the ten kinds of token
// (none, expired, bad signature, alg none, wrong issuer and audience, the
// four roles) → UNAUTHENTICATED, PERMISSION_DENIED or let in, and a
// refused call leaves the state hash unchanged.
func TestGRPCAuthMatrixOfEveryMethod(t *testing.T) {
	n, conn := startWithJWTConfig(t, auth.Config{Issuer: authtest.Issuer, Audience: authtest.Audience}, nil)
	kinds, err := authtest.Kinds(grpcSecret)
	if err != nil {
		t.Fatal(err)
	}
	hash := stateHash(t, n)
	svc := pb.File_grpcapi_queenpb_queen_proto.Services().ByName("Queen")
	methods := svc.Methods()
	for i := 0; i < methods.Len(); i++ {
		m := methods.Get(i)
		full := "/" + string(svc.FullName()) + "/" + string(m.Name())
		acc := pipeline.MethodAccess(full)
		level, producer := acc.Level, acc.Producer
		for _, k := range kinds {
			call := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if k.Token != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+k.Token)
				}
				in, out := dynamicpb.NewMessage(m.Input()), dynamicpb.NewMessage(m.Output())
				if !m.IsStreamingServer() {
					return conn.Invoke(ctx, full, in, out)
				}
				s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full)
				if err == nil {
					if err = s.SendMsg(in); err == nil {
						s.CloseSend()
						err = s.RecvMsg(out)
					}
				}
				return err
			}
			before := hash()
			err := call()
			code := status.Code(err)
			var want codes.Code = codes.OK // OK here means "let in": any code but the two below
			switch {
			case level == auth.Public: // the Leader call, like /health
			case k.Role == "":
				want = codes.Unauthenticated
			case !authtest.Allows(k.Role, level, producer):
				want = codes.PermissionDenied
			}
			switch {
			case want == codes.OK && (code == codes.Unauthenticated || code == codes.PermissionDenied):
				t.Errorf("%s as %s: %v, want it let in", full, k.Name, err)
			case want != codes.OK && code != want:
				t.Errorf("%s as %s: %v, want %v", full, k.Name, err, want)
			case want != codes.OK && !authtest.Unchanged(hash, before, func() { call() }):
				t.Errorf("%s as %s: refused but the state changed", full, k.Name)
			}
		}
	}
	t.Logf("%d methods × %d kinds of token checked", methods.Len(), len(kinds))
}

func stateHash(t *testing.T, n *grpctest.Node) func() string {
	return func() string {
		idx, h, err := n.Node.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h, "@", idx)
	}
}

// The internal forwarding service, called directly on a node with peer
// TLS: every method × the ten kinds of token, without a peer certificate,
// is refused (an admin token is no way in) and changes nothing; with a
// certificate the cluster CA signed, and no token at all, it is let in.
func TestGRPCAuthMatrixOfTheForwardingService(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	cert, key := ca.Issue(t, dir, "n1")
	peer, err := tlsfiles.LoadPeer(cert, key, ca.WriteCA(t, dir, "ca.pem"), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := startWithJWTConfig(t, auth.Config{Issuer: authtest.Issuer, Audience: authtest.Audience}, peer)
	kinds, err := authtest.Kinds(grpcSecret)
	if err != nil {
		t.Fatal(err)
	}
	hash := stateHash(t, n)
	dial := func(cfg *tls.Config) *grpc.ClientConn {
		conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	stranger := dial(&tls.Config{InsecureSkipVerify: true})
	member := dial(peer.ClientConfig())
	svc := internalpb.File_grpcapi_internalpb_forward_proto.Services().ByName("Forward")
	methods := svc.Methods()
	for i := 0; i < methods.Len(); i++ {
		m := methods.Get(i)
		full := "/" + string(svc.FullName()) + "/" + string(m.Name())
		call := func(conn *grpc.ClientConn, token string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
			}
			return conn.Invoke(ctx, full, dynamicpb.NewMessage(m.Input()), dynamicpb.NewMessage(m.Output()))
		}
		for _, k := range kinds {
			before := hash()
			if err := call(stranger, k.Token); status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s without a peer certificate, as %s: %v, want PERMISSION_DENIED", full, k.Name, err)
			} else if !authtest.Unchanged(hash, before, func() { call(stranger, k.Token) }) {
				t.Errorf("%s without a peer certificate, as %s: refused but the state changed", full, k.Name)
			}
		}
		if err := call(member, ""); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
			t.Errorf("%s from a node (peer certificate, no token): %v, want it let in", full, err)
		}
	}
	t.Logf("%d forwarding methods × %d kinds of token checked", methods.Len(), len(kinds))
}
