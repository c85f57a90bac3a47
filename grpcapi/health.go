package grpcapi

import (
	"context"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/queen-node/queen-node/grpcapi/queenpb"
)

// healthService is grpc's standard health server, told the node's
// readiness before every Check and, while a Watch lasts, every
// healthRefresh. Both the whole server ("") and queen.v1.Queen report
// SERVING while the node is ready (it knows a leader and is caught up, the
// HTTP /health rule). A Watch ends when the node starts to stop, so that a
// graceful server stop does not wait for it.
type healthService struct {
	*health.Server
	node Node
}

const healthRefresh = 500 * time.Millisecond

func newHealth(node Node) *healthService {
	h := &healthService{Server: health.NewServer(), node: node}
	h.refresh()
	return h
}

func (h *healthService) refresh() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.node.Ready() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.SetServingStatus("", st)
	h.SetServingStatus(queenpb.Queen_ServiceDesc.ServiceName, st)
}

// Check answers from the node's readiness now.
func (h *healthService) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, in)
}

// Watch streams status changes while the client listens.
func (h *healthService) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	h.refresh() // the first answer is the status now
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		t := time.NewTicker(healthRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.node.Draining():
				cancel()
				return
			case <-t.C:
				h.refresh()
			}
		}
	}()
	return h.Server.Watch(in, watchStream{stream, ctx})
}

// watchStream is a Watch stream whose context also ends when the node
// drains.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

// Leader names the leader this node knows and its client addresses.
func (s *Public) Leader(ctx context.Context, _ *queenpb.LeaderRequest) (*queenpb.LeaderResponse, error) {
	st := s.node.StatusOf(ctx) // the leader of the caller's tenant's group
	return &queenpb.LeaderResponse{NodeId: s.node.ID(), LeaderId: st.LeaderID, LeaderHttp: st.LeaderHTTP, LeaderGrpc: st.LeaderGRPC}, nil
}
