package grpcapi

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/grpcapi/internalpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/tenant"
)

// Option configures the public service.
type Option func(*options)

type options struct {
	rules          *request.Rules
	requestTimeout time.Duration
	auth           *auth.Verifier
	tls            *tls.Config
	peerVerified   func(tls.ConnectionState) bool
	logger         *slog.Logger
	trustTenant    bool // read the x-queen-tenant metadata (--trust-tenant-header)
}

// WithTrustedTenantHeader reads a call's tenant from its x-queen-tenant
// metadata when its token has no tenant claim (--trust-tenant-header).
func WithTrustedTenantHeader(trust bool) Option {
	return func(o *options) { o.trustTenant = trust }
}

// WithLogger is where the public service's audit lines go; default
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithPeerTLS serves the port over TLS (creds: tlsfiles.Peer's
// SharedServerConfig) and lets only callers that presented a certificate
// the cluster CA signed (verified) use the internal forwarding service.
func WithPeerTLS(creds *tls.Config, verified func(tls.ConnectionState) bool) Option {
	return func(o *options) { o.tls, o.peerVerified = creds, verified }
}

// WithTLS serves the port over TLS (creds: tlsfiles.Pair's ServerConfig)
// without peer TLS: the forwarding service then takes any caller, as it
// does in clear text.
func WithTLS(creds *tls.Config) Option {
	return func(o *options) { o.tls = creds }
}

// WithAuth puts the public service behind JWTs (spec §4.17); nil = off.
func WithAuth(v *auth.Verifier) Option {
	return func(o *options) { o.auth = v }
}

// WithRules sets the node's request rules, shared with the HTTP API (so
// that per-node limits hold across both); default: request.New's defaults.
func WithRules(r *request.Rules) Option {
	return func(o *options) { o.rules = r }
}

// WithRequestTimeout bounds a write's wait for its entry; 0 = 10s.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.rules == nil {
		o.rules = request.New(request.Options{})
	}
	if o.requestTimeout <= 0 {
		o.requestTimeout = 10 * time.Second
	}
	return o
}

// NewServer builds the node's gRPC server: the internal forwarding
// service, the public queen.v1.Queen service, the standard health service
// (SERVING while the node is ready) and server reflection.
func NewServer(node Node, opts ...Option) *grpc.Server {
	o := buildOptions(opts)
	door := &doors{auth: o.auth, tenants: &tenant.Door{TrustHeader: o.trustTenant, Log: o.logger, Front: "grpc"}}
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(256 << 20), grpc.MaxSendMsgSize(256 << 20),
		grpc.ChainUnaryInterceptor(recoverUnary, peerOnly(o.peerVerified), unaryAuth(door)),
		grpc.ChainStreamInterceptor(recoverStream, streamAuth(door))}
	if o.tls != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(o.tls)))
	}
	s := grpc.NewServer(sopts...)
	internalpb.RegisterForwardServer(s, NewForwardServer(node))
	queenpb.RegisterQueenServer(s, NewPublic(node, opts...))
	healthpb.RegisterHealthServer(s, newHealth(node))
	reflection.Register(s)
	return s
}

// recoverUnary and recoverStream answer a handler's panic with INTERNAL
// instead of letting it end the process: no request may crash a node.
func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer recovered(info.FullMethod, &err)
	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer recovered(info.FullMethod, &err)
	return handler(srv, ss)
}

func recovered(method string, err *error) {
	if r := recover(); r != nil {
		slog.Error("grpc: a handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "internal error in %s", method)
	}
}
