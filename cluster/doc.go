// Package cluster is the Node: it owns the Raft instance and the FSM, turns
// a front end's command into a log entry (stamping the leader's time),
// answers it from its own apply result, serves linearizable reads, wakes
// parked long-poll pops, and runs the leader's background loops. See
// DESIGN.md for why each piece is shaped the way it is.
package cluster
