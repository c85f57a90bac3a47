package grpcapi_test

import (
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func TestHealthAndReflection(t *testing.T) {
	_, _, conn := dial(t)
	ctx := ctxT(t)
	h := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "queen.v1.Queen"} {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, r, err)
		}
	}
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		found[s.Name] = true
	}
	for _, want := range []string{"queen.v1.Queen", "grpc.health.v1.Health", "queen.internal.v1.Forward"} {
		if !found[want] {
			t.Errorf("reflection does not list %s: %v", want, found)
		}
	}
}
