package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/request"
)

// Every failure gets the code its kind names in package request; the
// retryable ones (nothing applied, or an outcome the request's own dedup
// makes safe to repeat) are UNAVAILABLE, as the HTTP API's 503.
func TestPublicStatus(t *testing.T) {
	cases := []struct {
		err    error
		want   codes.Code
		reason string
	}{
		{request.Bad("Queue must be a string"), codes.InvalidArgument, "bad_request"},
		{request.KVBad("kv_bad_namespace", "op at index 0: ns"), codes.InvalidArgument, "kv_bad_namespace"},
		{fmt.Errorf("wrapped: %w", cluster.ErrNoLeader), codes.Unavailable, "no_leader"},
		{cluster.ErrNotLeader, codes.Unavailable, "retry"},
		{cluster.ErrOutcomeUnknown, codes.Unavailable, "outcome_unknown"},
		{cluster.ErrShutdown, codes.Unavailable, "shutting_down"},
		{cluster.ErrTimeout, codes.Unavailable, "timeout"},
		{cluster.ErrInternal, codes.Internal, "internal"},
		{idempotency.ErrInFlight, codes.AlreadyExists, "idempotency_key_in_flight"},
		{idempotency.ErrKeyReused, codes.FailedPrecondition, "idempotency_key_reused"},
		{&request.Error{Kind: request.RateLimited, Msg: "slow down", Code: "kv_rate_limited"}, codes.ResourceExhausted, "kv_rate_limited"},
		{context.Canceled, codes.Unavailable, "timeout"},
		{errors.New("something else"), codes.Internal, "internal"},
	}
	for _, tc := range cases {
		st := status.Convert(publicStatus(tc.err))
		if st.Code() != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, st.Code(), tc.want)
		}
		if got := infoReason(st); got != tc.reason {
			t.Errorf("%v: reason %q, want %q", tc.err, got, tc.reason)
		}
	}
	if publicStatus(nil) != nil {
		t.Error("nil error became a status")
	}
	if already := status.Error(codes.NotFound, "already a status"); publicStatus(already) != already {
		t.Error("a status was converted again")
	}
	if st := status.Convert(publicStatus(request.KVBad("kv_bad_namespace", "detail"))); st.Message() != "detail" {
		t.Errorf("kv refusal message %q, want its detail", st.Message())
	}
}

func infoReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// The forwarding client reads the reason back: an error the leader
// answered comes back as the same error value, whatever its code.
func TestForwardStatusRoundTrip(t *testing.T) {
	for _, e := range []error{cluster.ErrNotLeader, cluster.ErrNoLeader, cluster.ErrOutcomeUnknown,
		cluster.ErrTimeout, cluster.ErrShutdown, cluster.ErrInternal, cluster.ErrUnknownServer, idempotency.ErrInFlight} {
		if back := fromForwardStatus(forwardStatus(e), true); !errors.Is(back, e) {
			t.Errorf("%v came back as %v", e, back)
		}
	}
	if back := fromForwardStatus(status.Error(codes.Unavailable, "connection reset"), true); !errors.Is(back, cluster.ErrOutcomeUnknown) {
		t.Errorf("a broken write came back as %v", back)
	}
	if back := fromForwardStatus(status.Error(codes.Unavailable, "connection reset"), false); !errors.Is(back, cluster.ErrNoLeader) {
		t.Errorf("a broken read came back as %v", back)
	}
}
