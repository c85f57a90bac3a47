package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/request"
)

const errDomain = "queen-node"

// publicStatus is the public API's status for a failure: the code package
// request gives its kind, the API's text, and the one machine word for it
// in an ErrorInfo detail (a KV or timer reason, an engine code such as
// no_leader, or bad_request).
func publicStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status
	}
	e := request.FromError(err)
	msg := e.Msg
	if e.Detail != "" {
		msg = e.Detail
	}
	return withInfo(e.Kind.GRPCCode(), msg, e.InfoReason())
}

func withInfo(code codes.Code, msg, reason string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errDomain})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// forwardErrors are the node's errors as the internal forwarding service
// carries them from the leader back to the follower, which must get the
// same error value (route retries on ErrNotLeader, the front end answers
// from the rest). The reason is the internal protocol's, not the API's.
var forwardErrors = []struct {
	err    error
	reason string
}{
	{cluster.ErrNotLeader, "not_leader"},
	{cluster.ErrNoLeader, "no_leader"},
	{cluster.ErrOutcomeUnknown, "outcome_unknown"},
	{cluster.ErrTimeout, "timeout"},
	{cluster.ErrShutdown, "shutting_down"},
	{cluster.ErrUnknownServer, "unknown_server"},
	{cluster.ErrInternal, "internal"},
	{cluster.ErrOverloaded, "overloaded"},
	{cluster.ErrStorageFull, "storage_full"},
	{cluster.ErrKafkaGroup, "kafka_group"},
	{idempotency.ErrInFlight, "in_flight"},
}

// forwardStatus is a leader-side error as the forwarding service answers it.
func forwardStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range forwardErrors {
		if errors.Is(err, e.err) {
			return withInfo(request.FromError(err).Kind.GRPCCode(), err.Error(), e.reason)
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromForwardStatus turns a forwarded call's error back into the node's
// error. An error that is not one of ours (the connection broke, the
// deadline passed on the wire) is ErrOutcomeUnknown for a write, which may
// have been applied, and ErrNoLeader for anything else.
func fromForwardStatus(err error, write bool) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, isInfo := d.(*errdetails.ErrorInfo); isInfo && info.Domain == errDomain {
				for _, e := range forwardErrors {
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
