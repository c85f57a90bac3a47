package grpcapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/grpcapi"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The auth matrix on gRPC: every queen.v1 method × no token, an expired
// token and the four roles → UNAUTHENTICATED, PERMISSION_DENIED or let in,
// and a refused call leaves the state hash unchanged.
func TestGRPCAuthMatrixOfEveryMethod(t *testing.T) {
	n, conn := startWithJWT(t)
	kinds := []struct{ name, token, role string }{
		{"no token", "", ""},
		{"expired", grpcToken(t, "x", "admin", -time.Hour), ""},
		{"read-only", grpcToken(t, "ro", "read-only", time.Hour), "read-only"},
		{"write-only", grpcToken(t, "wo", "write-only", time.Hour), "write-only"},
		{"read-write", grpcToken(t, "rw", "read-write", time.Hour), "read-write"},
		{"admin", grpcToken(t, "ad", "admin", time.Hour), "admin"},
	}
	hash := func() string {
		idx, h, err := n.Node.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h, "@", idx)
	}
	svc := pb.File_grpcapi_queenpb_queen_proto.Services().ByName("Queen")
	methods := svc.Methods()
	for i := 0; i < methods.Len(); i++ {
		m := methods.Get(i)
		full := "/" + string(svc.FullName()) + "/" + string(m.Name())
		level, producer := grpcapi.MethodAccess(full)
		for _, k := range kinds {
			call := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if k.token != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+k.token)
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
			case k.role == "":
				want = codes.Unauthenticated
			case !authtest.Allows(k.role, level, producer):
				want = codes.PermissionDenied
			}
			switch {
			case want == codes.OK && (code == codes.Unauthenticated || code == codes.PermissionDenied):
				t.Errorf("%s as %s: %v, want it let in", full, k.name, err)
			case want != codes.OK && code != want:
				t.Errorf("%s as %s: %v, want %v", full, k.name, err, want)
			case want != codes.OK && !authtest.Unchanged(hash, before, func() { call() }):
				t.Errorf("%s as %s: refused but the state changed", full, k.name)
			}
		}
	}
	t.Logf("%d methods × %d kinds of token checked", methods.Len(), len(kinds))
}
