// Package queue is the queue domain of one Raft log: queues, partitions,
// their messages, consumer groups and their cursors, leases over
// partitions, dead letters, and the rules of push, pop and ack (spec §5),
// with the storage they own: records in the state file (store) and message
// bodies in append-only segment files (msgstore). The state machine (fsm)
// decodes an entry and makes one call here per command, through a Tx it
// begins with the entry's index and time; tests drive a Domain the same way
// without the FSM. Retention (retention.go) removes what consumers are
// done with, as a prefix of each partition, in entries the leader proposes.
// The front ends read through Reader (reader.go), which also counts a
// queue's messages for every view that shows them (counts.go), so that no
// front end sums partitions itself.
//
// Everything here is deterministic: time is the entry's, ids of objects this
// package creates (queues, partitions) derive from the log's name, the entry
// index and an ordinal, and nothing iterates a map into a result.
package queue
