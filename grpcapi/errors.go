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

// Errors of the public API that are not the cluster's.
var (
	// errKVDisabled: the operator's kill switch is off (HTTP 503).
	errKVDisabled = errors.New("grpcapi: kv is disabled by the operator")
	// errKVRateLimited: KV reads outside transactions passed this node's
	// rate (HTTP 429).
	errKVRateLimited = errors.New("grpcapi: kv read rate exceeded on this node")
)

// invalidError is a request refused before anything was applied: the HTTP
// API's 4xx, INVALID_ARGUMENT here. reason is the ErrorInfo reason
// ("bad_request", or a KV reason such as "kv_bad_namespace").
type invalidError struct {
	msg    string
	reason string
}

func (e *invalidError) Error() string { return e.msg }

func invalid(msg string) error { return &invalidError{msg: msg, reason: "bad_request"} }

// invalidKV is a refused KV op, with the HTTP API's reason string.
func invalidKV(reason, detail string) error { return &invalidError{msg: detail, reason: reason} }

// errorCodes pairs each error with its gRPC code and a stable reason string
// carried in an ErrorInfo detail. A failure a client may retry (nothing was
// applied, or the outcome is unknown and the request carries its own
// dedup) is UNAVAILABLE, as the HTTP API's 503.
var errorCodes = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{cluster.ErrNotLeader, codes.Unavailable, "not_leader"},
	{cluster.ErrNoLeader, codes.Unavailable, "no_leader"},
	{cluster.ErrOutcomeUnknown, codes.Unavailable, "outcome_unknown"},
	{cluster.ErrTimeout, codes.DeadlineExceeded, "timeout"},
	{cluster.ErrShutdown, codes.Unavailable, "shutting_down"},
	{cluster.ErrInFlight, codes.AlreadyExists, "in_flight"},
	{cluster.ErrUnknownServer, codes.NotFound, "unknown_server"},
	{cluster.ErrInternal, codes.Internal, "internal"},
	{errKVDisabled, codes.Unavailable, "kv_disabled"},
	{errKVRateLimited, codes.ResourceExhausted, "kv_rate_limited"},
}

// ToStatus turns an error into a gRPC status error: the one place where
// both services (forwarding and public) choose codes.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status
	}
	var inv *invalidError
	if errors.As(err, &inv) {
		return withInfo(codes.InvalidArgument, inv.msg, inv.reason)
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return withInfo(e.code, err.Error(), e.reason)
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

func withInfo(code codes.Code, msg, reason string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errDomain})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
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
