package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/cluster"
)

const errDomain = "queen-node"

// errorCodes pairs each cluster error with its gRPC code and a stable
// reason string carried in an ErrorInfo detail.
var errorCodes = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{cluster.ErrNotLeader, codes.FailedPrecondition, "not_leader"},
	{cluster.ErrNoLeader, codes.Unavailable, "no_leader"},
	{cluster.ErrOutcomeUnknown, codes.Unavailable, "outcome_unknown"},
	{cluster.ErrTimeout, codes.DeadlineExceeded, "timeout"},
	{cluster.ErrShutdown, codes.Unavailable, "shutting_down"},
	{cluster.ErrInFlight, codes.AlreadyExists, "in_flight"},
	{cluster.ErrUnknownServer, codes.NotFound, "unknown_server"},
	{cluster.ErrInternal, codes.Internal, "internal"},
}

// ToStatus turns a cluster error into a gRPC status error.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			st, derr := status.New(e.code, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: e.reason, Domain: errDomain})
			if derr != nil {
				return status.Error(e.code, err.Error())
			}
			return st.Err()
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// FromStatus turns a forwarded call's error back into a cluster error. An
// error that is not one of ours (the connection broke, the deadline passed
// on the wire) is ErrOutcomeUnknown for a write, which may have been
// applied, and ErrNoLeader for anything else.
func FromStatus(err error, write bool) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if ok {
		for _, d := range st.Details() {
			if info, isInfo := d.(*errdetails.ErrorInfo); isInfo && info.Domain == errDomain {
				for _, e := range errorCodes {
					if e.reason == info.Reason {
						return fmt.Errorf("%w (from the leader: %s)", e.err, st.Message())
					}
				}
			}
		}
	}
	if write {
		return fmt.Errorf("%w: forwarding to the leader failed: %v", cluster.ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("%w: forwarding to the leader failed: %v", cluster.ErrNoLeader, err)
}
