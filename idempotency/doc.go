// Package idempotency owns the Idempotency-Key (seed 003, the way payment
// APIs do it): every rule of it lives here, and the front ends, the node
// and the state machine each make one call into it.
//
//   - A front end turns the request's key into the command's Idempotency
//     (New: the key's syntax, and a hash of the operation and its body),
//     and reads what apply answered (Outcome).
//   - The leader refuses a second command with a key whose first command is
//     still being applied (InFlight): 409, nothing proposed.
//   - The state machine answers a command whose key it has seen with the
//     stored outcome instead of applying it (Replay), and stores the first
//     definitive outcome of a keyed command in the same entry as the
//     command's own effects (Remember): a retry after a leader failover finds
//     it too, because it is replicated state. Records expire by entry time
//     (Sweep).
//
// The stored outcome is the command's result as the log's vocabulary says
// it (a marshalled command.Response), or the command.Refusal a front end
// decided without a state change (a 4xx); never HTTP bytes. A retry with
// the same key and body is answered from it; the same key with another body
// is ErrKeyReused (422). An outcome is stored only when it is definitive:
// an internal error, or a request that never reached apply (a 5xx), is not,
// so its retry really runs again.
package idempotency
