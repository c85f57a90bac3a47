// Package fsm is the replicated state machine: raft.FSM and
// raft.BatchingFSM over the state file (package store). It decodes each
// log entry (a command.Command), refuses one of a format it does not know,
// answers a command whose Idempotency-Key it has seen from the stored
// outcome (package idempotency), dispatches the rest by body type to their
// handlers (dispatch.go), runs each in its own staged transaction, and
// commits one batch of entries as one bbolt transaction with the applied
// index inside it. Snapshot and Restore stream and swap the whole file.
//
// Apply is deterministic: it reads only the leader's stamp for time and
// the ids the proposer minted, and never lets map order leak (DESIGN.md).
// Reader answers the front ends' reads from one consistent view.
//
// Today the queue domain (partitions, messages, cursors, groups, the DLQ)
// and the lease index still live here as methods of the apply context;
// kvstore, leases and idempotency are their own packages.
package fsm
