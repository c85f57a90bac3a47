package grpcapi

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/tenant"
)

// JWT on gRPC: the same tokens as on HTTP, in the per-call metadata
// "authorization" ("Bearer <token>"), with the same levels: each method's
// row of the access table (package pipeline) is its HTTP twin's. Refusals are UNAUTHENTICATED (the
// HTTP 401s) and PERMISSION_DENIED (403) with the spec's texts.

// doors are what a call passes at the door: its token, then its tenant.
type doors struct {
	auth    *auth.Verifier // nil = JWT off
	tenants *tenant.Door
}

// authorize is the check both interceptors make: the token (JWT on), then
// the call's tenant (package tenant's one rule), carried in its context.
// A forwarded call names its tenant itself (forward.go).
func authorize(ctx context.Context, d *doors, method string) (context.Context, error) {
	ctx, err := authenticate(ctx, d.auth, method)
	if err != nil || strings.HasPrefix(method, forwardService) {
		return ctx, err
	}
	var claim string
	if id := auth.IdentityFrom(ctx); id != nil {
		claim = id.Tenant
	}
	name, err := d.tenants.Resolve(claim, metadataValue(ctx, tenant.Header))
	if err != nil {
		return ctx, status.Error(codes.InvalidArgument, err.Error())
	}
	return tenant.With(ctx, name), nil
}

func metadataValue(ctx context.Context, key string) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if vals := md.Get(key); len(vals) > 0 {
			return vals[0]
		}
	}
	return ""
}

// authenticate checks the call's token against its method's row of the
// access table.
func authenticate(ctx context.Context, v *auth.Verifier, method string) (context.Context, error) {
	acc := pipeline.MethodAccess(method)
	if v == nil || acc.Level == auth.Public {
		return ctx, nil
	}
	header := metadataValue(ctx, "authorization")
	id, aerr := v.Authenticate(header)
	if aerr == nil && !id.Allows(acc.Level, acc.Producer) {
		aerr = auth.ErrInsufficient
	}
	if aerr != nil {
		code := codes.Unauthenticated
		switch {
		case aerr == auth.ErrInsufficient:
			code = codes.PermissionDenied
		case aerr.Status == http.StatusBadRequest: // a tenant claim that is not a tenant
			code = codes.InvalidArgument
		}
		return ctx, status.Error(code, aerr.Msg)
	}
	return auth.WithIdentity(ctx, id), nil
}

func unaryAuth(d *doors) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := authorize(ctx, d, info.FullMethod)
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

func streamAuth(d *doors) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := authorize(ss.Context(), d, info.FullMethod)
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
