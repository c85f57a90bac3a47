package grpcapi

import (
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/queen-node/queen-node/grpcapi/internalpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
)

// Option configures the public service.
type Option func(*options)

type options struct {
	defaultSubscriptionMode string
	kvReadRate              float64
	requestTimeout          time.Duration
}

// WithDefaultSubscriptionMode sets where a new group starts when a pop
// names no mode: "new" (the default, 2.0) or "all" (0.15), as the HTTP API.
func WithDefaultSubscriptionMode(mode string) Option {
	return func(o *options) { o.defaultSubscriptionMode = mode }
}

// WithKVReadRate limits KV reads outside transactions on this node, per
// second (burst twice that); 0 = the default 200, < 0 = unlimited.
func WithKVReadRate(perSecond float64) Option {
	return func(o *options) { o.kvReadRate = perSecond }
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
	if o.defaultSubscriptionMode == "" {
		o.defaultSubscriptionMode = "new"
	}
	if o.kvReadRate == 0 {
		o.kvReadRate = 200
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
	s := grpc.NewServer(grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20))
	internalpb.RegisterForwardServer(s, NewForwardServer(node))
	queenpb.RegisterQueenServer(s, NewPublic(node, opts...))
	healthpb.RegisterHealthServer(s, newHealth(node))
	reflection.Register(s)
	return s
}
