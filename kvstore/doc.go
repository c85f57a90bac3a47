// Package kvstore is the broker's namespaced key-value state (spec §4.7): the
// home of exactly-once markers. It runs inside fsm.Apply, on the command's
// staged transaction, so a KV write commits in the same log entry as the
// acks and pushes beside it, or not at all.
//
// Versions are the index of the log entry that wrote the value: opaque,
// increasing, the same on every replica. Expiry is judged against the
// entry's time only; an expired entry is invisible at once and removed later
// by a sweep entry.
package kvstore
