package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/cluster"
)

// Every error a handler can return maps to one code in ToStatus; the
// retryable ones (nothing applied, or an outcome the request's own dedup
// makes safe to repeat) are UNAVAILABLE, as the HTTP API's 503.
func TestToStatus(t *testing.T) {
	cases := []struct {
		err  error
		want codes.Code
	}{
		{invalid("Queue must be a string"), codes.InvalidArgument},
		{invalidKV("kv_bad_namespace", "op at index 0: ns"), codes.InvalidArgument},
		{fmt.Errorf("wrapped: %w", cluster.ErrNoLeader), codes.Unavailable},
		{cluster.ErrNotLeader, codes.Unavailable},
		{cluster.ErrOutcomeUnknown, codes.Unavailable},
		{cluster.ErrShutdown, codes.Unavailable},
		{cluster.ErrTimeout, codes.DeadlineExceeded},
		{cluster.ErrInternal, codes.Internal},
		{cluster.ErrInFlight, codes.AlreadyExists},
		{errKVDisabled, codes.Unavailable},
		{errKVRateLimited, codes.ResourceExhausted},
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{errors.New("something else"), codes.Unknown},
		{status.Error(codes.NotFound, "already a status"), codes.NotFound},
	}
	for _, tc := range cases {
		if got := status.Code(ToStatus(tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
	if ToStatus(nil) != nil {
		t.Error("nil error became a status")
	}
	st := status.Convert(ToStatus(invalidKV("kv_bad_namespace", "detail")))
	if st.Message() != "detail" || len(st.Details()) != 1 {
		t.Errorf("kv refusal: %v %v", st.Message(), st.Details())
	}
}

// The forwarding client reads the reason back: an error the leader
// answered comes back as the same cluster error, whatever its code.
func TestFromStatusRoundTrip(t *testing.T) {
	for _, e := range []error{cluster.ErrNotLeader, cluster.ErrNoLeader, cluster.ErrOutcomeUnknown,
		cluster.ErrTimeout, cluster.ErrShutdown, cluster.ErrInternal, cluster.ErrInFlight} {
		if back := FromStatus(ToStatus(e), true); !errors.Is(back, e) {
			t.Errorf("%v came back as %v", e, back)
		}
	}
	if back := FromStatus(status.Error(codes.Unavailable, "connection reset"), true); !errors.Is(back, cluster.ErrOutcomeUnknown) {
		t.Errorf("a broken write came back as %v", back)
	}
	if back := FromStatus(status.Error(codes.Unavailable, "connection reset"), false); !errors.Is(back, cluster.ErrNoLeader) {
		t.Errorf("a broken read came back as %v", back)
	}
}
