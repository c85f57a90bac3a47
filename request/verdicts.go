package request

import (
	"fmt"

	"github.com/queen-node/queen-node/command"
)

// Verdicts the API answers as errors. Most refusals of a command are values
// in its result (a transaction's success:false with a reason, a KV write's
// applied:false), answered 200. The operator's kill switches (addendum
// §4.4) are not: the caller can do nothing about them but wait or stop.
//
// The same switch answers differently on two routes, on purpose:
//
//   - On the KV routes (and POST /api/v1/timers) the switch is the whole
//     route being off: 503 with Retry-After, the answer of a service that is
//     down for now, which every client retries with backoff, so a consumer
//     that only reads markers resumes by itself when the operator turns KV
//     back on.
//   - On /api/v1/transaction the switch refuses a transaction that carries
//     kv (or schedules a timer). Retrying it automatically is wrong: the
//     transaction usually acks a message under a lease, and a client that
//     retries for minutes holds the lease past its expiry and then has its
//     ack refused anyway. 403 (Queen 1.x answers it so inside the
//     transaction route) is never retried: the worker sees the refusal at
//     once, and the message comes back when its lease runs out.
//
// Both say code kv_disabled (or timers_disabled); gRPC maps them to
// UNAVAILABLE and FAILED_PRECONDITION, as the kinds say.

var (
	errKVOff     = "kv is disabled by the operator (GET /api/v1/system/kv-timers)"
	errTimersOff = "timer scheduling is paused by the operator (GET /api/v1/system/kv-timers)"
)

// KVVerdict is the error a KV call's result is answered with, or nil.
func KVVerdict(res *command.KVBatchResult) *Error {
	if res.Reason == command.Reason_KV_DISABLED {
		return &Error{Kind: Unavailable, Msg: errKVOff, Code: "kv_disabled", RetryAfter: 5}
	}
	return nil
}

// TimersVerdict is the error a timer call's result is answered with, or nil.
func TimersVerdict(res *command.TimerBatchResult) *Error {
	switch res.Reason {
	case command.Reason_TIMERS_DISABLED:
		return &Error{Kind: Unavailable, Msg: errTimersOff, Code: "timers_disabled", RetryAfter: 5}
	case command.Reason_BAD_REQUEST:
		return &Error{Kind: Invalid, Msg: "timers_encrypted_conflict", Reason: "timers_encrypted_conflict",
			Detail: fmt.Sprintf("operations[%d]: encrypted is set, but the queue encrypts at rest and owns that flag", res.FailedIndex)}
	}
	return nil
}

// TxnVerdict is the error a transaction's result is answered with, or nil
// (every other refusal is a value: success:false and a reason).
func TxnVerdict(res *command.TxnResult) *Error {
	switch res.Reason {
	case command.Reason_KV_DISABLED:
		return &Error{Kind: Refused, Msg: errKVOff, Code: "kv_disabled"}
	case command.Reason_TIMERS_DISABLED:
		return &Error{Kind: Refused, Msg: errTimersOff, Code: "timers_disabled"}
	}
	return nil
}
