package queen

import (
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
)

// Error is a request the broker (or the way to it) refused. Status is the
// HTTP status on the HTTP transport (0 on gRPC); Code is the gRPC code on
// gRPC, and the equivalent code of the HTTP status on HTTP, so that one
// check works on both.
type Error struct {
	Status  int
	Code    codes.Code
	Message string
	Reason  string // a machine reason when the broker gave one (kv_bad_namespace, no_leader, ...)
	grpc    bool
	// attemptTimedOut: no answer within RetryPolicy.AttemptTimeout.
	attemptTimedOut bool
}

func (e *Error) Error() string {
	where := fmt.Sprintf("HTTP %d", e.Status)
	switch {
	case e.grpc:
		where = e.Code.String()
	case e.Status == 0 && e.Code == codes.DeadlineExceeded:
		where = "timed out"
	case e.Status == 0:
		where = "unreachable"
	}
	if e.Reason != "" && e.Reason != e.Message {
		return fmt.Sprintf("queen: %s: %s (%s)", where, e.Message, e.Reason)
	}
	return fmt.Sprintf("queen: %s: %s", where, e.Message)
}

// Retryable reports whether the request may be sent again: the HTTP API's
// 5xx and gRPC's UNAVAILABLE, and a request whose Idempotency-Key is still
// in flight (HTTP 409, gRPC ALREADY_EXISTS; the retry is answered from the
// first request's record once it is applied), and nothing else. Every
// write the broker answers that way was either not applied or carries its
// own dedup (a push's transactionId, an ack's lease, a transaction's gate
// or key). On HTTP a connection that could not be made or broke before the
// answer (Status 0, UNAVAILABLE) counts too, as gRPC reports it
// UNAVAILABLE as well.
func (e *Error) Retryable() bool {
	if e.Reason == reasonKeyInFlight {
		return true
	}
	if e.grpc || e.Status == 0 {
		return e.Code == codes.Unavailable
	}
	return e.Status >= 500
}

// Code is err's gRPC code (codes.OK for nil, codes.Unknown for an error
// that is not an *Error).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return codes.Unknown
}

// The broker's reasons for the Idempotency-Key's refusals: the same key is
// still being applied (retryable), or it came with another request first
// (HTTP 422, gRPC FAILED_PRECONDITION).
const (
	reasonKeyInFlight = "idempotency_key_in_flight"
	reasonKeyReused   = "idempotency_key_reused"
)

// ErrIdempotencyKeyReused matches (errors.Is) a write refused because its
// Idempotency-Key was first used with a different request: nothing was
// applied, and the key keeps the first request's outcome.
var ErrIdempotencyKeyReused = errors.New("queen: the Idempotency-Key was first used with another request")

// Is matches ErrIdempotencyKeyReused.
func (e *Error) Is(target error) bool {
	return target == ErrIdempotencyKeyReused && e.Reason == reasonKeyReused
}

// httpCodes maps the HTTP API's statuses to the codes the broker's gRPC API
// gives the same refusals (409 is a key still in flight: ALREADY_EXISTS).
var httpCodes = map[int]codes.Code{
	http.StatusBadRequest: codes.InvalidArgument, http.StatusRequestEntityTooLarge: codes.InvalidArgument,
	http.StatusUnauthorized: codes.Unauthenticated, http.StatusForbidden: codes.PermissionDenied,
	http.StatusNotFound: codes.NotFound, http.StatusConflict: codes.AlreadyExists,
	http.StatusUnprocessableEntity: codes.FailedPrecondition, http.StatusTooManyRequests: codes.ResourceExhausted,
	http.StatusInternalServerError: codes.Internal, http.StatusServiceUnavailable: codes.Unavailable,
	http.StatusGatewayTimeout: codes.DeadlineExceeded,
}

func httpError(status int, msg, reason string) *Error {
	c, ok := httpCodes[status]
	switch {
	case ok:
	case status >= 500:
		c = codes.Unavailable
	default:
		c = codes.Unknown
	}
	return &Error{Status: status, Code: c, Message: msg, Reason: reason}
}

// ErrLeaseLost matches (errors.Is) an ack refused because the lease it
// carried no longer holds the message: it ran out, or a failed ack released
// it. The message comes back; its work may be redone.
var ErrLeaseLost = errors.New("queen: the lease no longer holds the message")

// AckError is an ack the broker refused (a value on the wire, an error
// here).
type AckError struct {
	TransactionID string
	Message       string
}

func (e *AckError) Error() string {
	return fmt.Sprintf("queen: ack of %s refused: %s", e.TransactionID, e.Message)
}

// Is matches ErrLeaseLost for a lease refusal.
func (e *AckError) Is(target error) bool {
	return target == ErrLeaseLost && e.Message == "Invalid or expired lease"
}

// LeaseError is a lease extension the broker refused: the lease is gone
// (acked, released or expired). It matches ErrLeaseLost.
type LeaseError struct {
	LeaseID string
	Message string // "Lease not found", "Lease already expired"
}

func (e *LeaseError) Error() string { return "queen: lease " + e.LeaseID + ": " + e.Message }

// Is matches ErrLeaseLost.
func (e *LeaseError) Is(target error) bool { return target == ErrLeaseLost }

// PushError is a pushed message the broker refused (status failed).
type PushError struct {
	Index   int
	Message string
}

func (e *PushError) Error() string {
	return fmt.Sprintf("queen: push item %d refused: %s", e.Index, e.Message)
}

// RejectedAckError: a transaction's ack no longer held its message (the
// lease ran out, or the message was settled already). Nothing was written.
type RejectedAckError struct {
	Message string
	// Index is the refused ack's index among the transaction's acks and
	// pushes, in the order they were added (-1: the broker did not say).
	Index int
}

func (e *RejectedAckError) Error() string { return "queen: transaction rejected_ack: " + e.Message }

// Is matches ErrLeaseLost.
func (e *RejectedAckError) Is(target error) bool { return target == ErrLeaseLost }

// DuplicateError: a transaction's push repeated a transactionId already
// stored in its partition. Nothing was written.
type DuplicateError struct{ Message string }

func (e *DuplicateError) Error() string { return "queen: transaction duplicate: " + e.Message }

// TxError is any other transaction refusal. Nothing was written.
type TxError struct{ Reason, Message string }

func (e *TxError) Error() string { return "queen: transaction " + e.Reason + ": " + e.Message }
