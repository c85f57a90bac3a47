package grpcapi

import (
	"context"
	"crypto/tls"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/pipeline"
)

// JWT on gRPC: the same tokens as on HTTP, in the per-call metadata
// "authorization" ("Bearer <token>"), with the same levels: each method's
// row of the access table (package pipeline) is its HTTP twin's. Refusals are UNAUTHENTICATED (the
// HTTP 401s) and PERMISSION_DENIED (403) with the spec's texts.

// authorize is the check both interceptors make.
func authorize(ctx context.Context, v *auth.Verifier, method string) (context.Context, error) {
	acc := pipeline.MethodAccess(method)
	if v == nil || acc.Level == auth.Public {
		return ctx, nil
	}
	var header string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if vals := md.Get("authorization"); len(vals) > 0 {
			header = vals[0]
		}
	}
	id, aerr := v.Authenticate(header)
	if aerr == nil && !id.Allows(acc.Level, acc.Producer) {
		aerr = auth.ErrInsufficient
	}
	if aerr != nil {
		code := codes.Unauthenticated
		if aerr == auth.ErrInsufficient {
			code = codes.PermissionDenied
		}
		return ctx, status.Error(code, aerr.Msg)
	}
	return auth.WithIdentity(ctx, id), nil
}

func unaryAuth(v *auth.Verifier) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := authorize(ctx, v, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

func streamAuth(v *auth.Verifier) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := authorize(ss.Context(), v, info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
	}
}

const forwardService = "/queen.internal.v1.Forward/"

// peerOnly refuses the internal forwarding service to a caller that did
// not present a certificate the cluster CA signed (with peer TLS on): an
// admin token is no way in. verified nil = peer TLS off.
func peerOnly(verified func(tls.ConnectionState) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if verified != nil && strings.HasPrefix(info.FullMethod, forwardService) {
			p, ok := peer.FromContext(ctx)
			ti, isTLS := credentials.TLSInfo{}, false
			if ok {
				ti, isTLS = p.AuthInfo.(credentials.TLSInfo)
			}
			if !isTLS || !verified(ti.State) {
				return nil, status.Error(codes.PermissionDenied, "the internal forwarding service answers nodes only (a peer certificate the cluster CA signed)")
			}
		}
		return handler(ctx, req)
	}
}
