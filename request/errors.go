package request

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
)

// Kind is the class of a failure: what status it gets on each wire.
type Kind int

// Kinds, with their statuses in kinds below.
const (
	Invalid     Kind = iota // the request is malformed; nothing was applied
	TooLarge                // a body, value or payload is over its limit
	Refused                 // the operator switched the operation off for good (no retry)
	NotFound                // the request names something that does not exist
	Conflict                // a request with the same Idempotency-Key is in flight
	KeyReused               // the Idempotency-Key came with another request
	RateLimited             // over a per-node rate; retry after a while
	Unavailable             // retry: nothing was applied, or the outcome is unknown and the request carries its own dedup
	Overloaded              // the node has too much in flight; nothing was applied, retry after a while
	StorageFull             // the data disk is nearly full; nothing was applied
	Internal                // a bug or a corrupt state; nothing was applied
	Forbidden               // the caller's token does not reach it (its role, or its queues scope); nothing was applied
)

var kinds = [...]struct {
	name string
	http int
	grpc codes.Code
}{
	Invalid:     {"invalid", http.StatusBadRequest, codes.InvalidArgument},
	TooLarge:    {"too_large", http.StatusRequestEntityTooLarge, codes.InvalidArgument},
	Refused:     {"forbidden", http.StatusForbidden, codes.FailedPrecondition},
	NotFound:    {"not_found", http.StatusNotFound, codes.NotFound},
	Conflict:    {"conflict", http.StatusConflict, codes.AlreadyExists},
	KeyReused:   {"key_reused", http.StatusUnprocessableEntity, codes.FailedPrecondition},
	RateLimited: {"rate_limited", http.StatusTooManyRequests, codes.ResourceExhausted},
	Unavailable: {"unavailable", http.StatusServiceUnavailable, codes.Unavailable},
	Overloaded:  {"overloaded", http.StatusTooManyRequests, codes.ResourceExhausted},
	StorageFull: {"storage_full", http.StatusInsufficientStorage, codes.ResourceExhausted},
	Internal:    {"internal", http.StatusInternalServerError, codes.Internal},
	Forbidden:   {"permission_denied", http.StatusForbidden, codes.PermissionDenied},
}

// HTTPStatus is the kind's HTTP status.
func (k Kind) HTTPStatus() int { return kinds[k].http }

// GRPCCode is the kind's gRPC code.
func (k Kind) GRPCCode() codes.Code { return kinds[k].grpc }

func (k Kind) String() string { return kinds[k].name }

// Error is a request the API refuses, or a failure it reports, in the API's
// terms. Msg is the {"error": ...} text; Reason and Detail are the machine
// fields of the KV and timer routes; Code is the stable code of an engine
// failure (no_leader, outcome_unknown, kv_disabled, ...).
type Error struct {
	Kind       Kind
	Msg        string
	Reason     string
	Detail     string
	Code       string
	RetryAfter int   // seconds; 0 = no Retry-After
	Err        error // the engine error behind it, if any
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// InfoReason is the one machine-readable word for the failure, as gRPC's
// ErrorInfo carries it: the reason, else the code, else "bad_request".
func (e *Error) InfoReason() string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.Code != "":
		return e.Code
	case e.Kind == Forbidden:
		return "permission_denied"
	}
	return "bad_request"
}

// Bad is a malformed request: 400 {"error": msg}.
func Bad(msg string) *Error { return &Error{Kind: Invalid, Msg: msg} }

// KVBad is a malformed KV op: 400 {"error":"kv_bad_request","reason":...}.
func KVBad(reason, detail string) *Error {
	return &Error{Kind: Invalid, Msg: "kv_bad_request", Reason: reason, Detail: detail}
}

// TimersBad is a malformed timer op: 400 {"error":"timers_bad_request",...}.
func TimersBad(reason, detail string) *Error {
	return &Error{Kind: Invalid, Msg: "timers_bad_request", Reason: reason, Detail: detail}
}

// Refusal is the error as the state stores it under an Idempotency-Key, so
// that a retry gets the same answer (only for refusals of a request, 4xx).
func (e *Error) Refusal() *command.Refusal {
	return &command.Refusal{Kind: e.Kind.String(), Error: e.Msg, Reason: e.Reason, Detail: e.Detail}
}

// Storable reports whether the error is a definitive answer to the request
// as sent (a 4xx of the rules), which an Idempotency-Key keeps.
func (e *Error) Storable() bool {
	return e.Err == nil && (e.Kind == Invalid || e.Kind == TooLarge || e.Kind == Refused)
}

// FromRefusal is a stored refusal as an error.
func FromRefusal(r *command.Refusal) *Error {
	e := &Error{Kind: Invalid, Msg: r.Error, Reason: r.Reason, Detail: r.Detail}
	for k, d := range kinds {
		if d.name == r.Kind {
			e.Kind = Kind(k)
		}
	}
	return e
}

// engineErrors are the node's failures, each with its kind and code. Every
// Unavailable one is safe to retry: either nothing was applied, or the
// outcome is unknown and the request carries its own dedup (a
// transactionId, a lease, a gate).
var engineErrors = []struct {
	err        error
	kind       Kind
	code, text string
}{
	{cluster.ErrNoLeader, Unavailable, "no_leader", "no leader: the cluster is electing one"},
	{cluster.ErrNotLeader, Unavailable, "retry", "the leader changed or cannot be reached: nothing was applied; retry"},
	{cluster.ErrOutcomeUnknown, Unavailable, "outcome_unknown", "the outcome of this write is unknown: it may or may not have been applied; retry it"},
	{cluster.ErrTimeout, Unavailable, "timeout", "timed out before the write was proposed"},
	{cluster.ErrShutdown, Unavailable, "shutting_down", "the node is shutting down"},
	{cluster.ErrUnknownServer, NotFound, "unknown_server", "no such node in the cluster configuration"},
	{cluster.ErrInternal, Internal, "internal", ""},
	{cluster.ErrBadBackup, Invalid, "bad_backup", ""},
	{cluster.ErrOverloaded, Overloaded, "overloaded", "overloaded: this node has too many writes in flight; retry after a while"},
	{cluster.ErrStorageFull, StorageFull, "storage_full", "storage full: the data disk is nearly full; free space or add capacity"},
	{cluster.ErrKafkaGroup, Conflict, "kafka_group", ""},
	{idempotency.ErrInFlight, Conflict, "idempotency_key_in_flight", ""},
	{idempotency.ErrKeyReused, KeyReused, "idempotency_key_reused", ""},
	{idempotency.ErrKeyTooLong, Invalid, "", ""},
	{idempotency.ErrKeyNotPrintable, Invalid, "", ""},
}

// FromError is any failure as the API reports it: an *Error as it is, an
// engine error by the table above, anything else internal.
func FromError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, ee := range engineErrors {
		if errors.Is(err, ee.err) {
			text := ee.text
			if text == "" {
				text = err.Error()
			}
			out := &Error{Kind: ee.kind, Msg: text, Code: ee.code, Err: err}
			switch ee.kind {
			case Unavailable, Overloaded:
				out.RetryAfter = 1
			case StorageFull:
				out.RetryAfter = 10
			}
			return out
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: Unavailable, Msg: err.Error(), Code: "timeout", RetryAfter: 1, Err: err}
	}
	return &Error{Kind: Internal, Msg: err.Error(), Code: "internal", Err: err}
}
