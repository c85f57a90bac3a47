// Package fsm is the replicated state machine: raft.FSM and
// raft.BatchingFSM over the state file (package store). It decodes each
// log entry (a command.Command), refuses one of a format it does not know,
// answers a command whose Idempotency-Key it has seen from the stored
// outcome (package idempotency), dispatches the rest by body type to their
// kind's handler (registry.go: one descriptor per kind of command, with
// everything else the node knows about it: kinds.go), runs each in its own
// staged transaction, and
// commits one batch of entries as one bbolt transaction with the applied
// index inside it, the batch's message bodies written to their segment
// files (package msgstore) just before. Snapshot and Restore stream and
// swap the state file and the message files together.
//
// Each handler decodes its command and makes one call into the domain that
// owns the rule: queue (push, pop, ack, cursors, groups, DLQ, leases),
// kvstore, timers, idempotency. Apply is deterministic: it reads only the
// leader's stamp for time and the ids the proposer minted, and never lets
// map order leak (DESIGN.md). Reader answers the front ends' reads from one
// consistent view, and Answer runs the queries a follower forwards.
package fsm
