package cluster

import "errors"

// Errors a front end maps to HTTP status codes and gRPC codes.
var (
	// ErrNotLeader: this node cannot apply or read linearizably and no
	// leader could be reached. Nothing was applied; retrying is safe.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrNoLeader: the cluster has no leader right now. Nothing was applied.
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrOutcomeUnknown: the entry was proposed but its fate is unknown
	// (leadership lost, timeout). It may still commit; retry with the same
	// dedup key or gate.
	ErrOutcomeUnknown = errors.New("cluster: outcome unknown")
	// ErrShutdown: the node is stopping.
	ErrShutdown = errors.New("cluster: shutting down")
	// ErrTimeout: the request's deadline passed before anything was proposed.
	ErrTimeout = errors.New("cluster: timed out before proposing")
	// ErrInternal: apply refused the command with an internal error; nothing
	// was written.
	ErrInternal = errors.New("cluster: internal error")
	// ErrOverloaded: the node has MaxInflight writes in flight already.
	// Nothing was applied; retry after a while.
	ErrOverloaded = errors.New("cluster: overloaded")
	// ErrStorageFull: the data disk of this node (or of the leader) is
	// nearly full; the write adds data and was refused. Nothing was applied.
	ErrStorageFull = errors.New("cluster: storage full")
	// ErrKafkaGroup: a Queen pop names a consumer group a Kafka client's
	// offset commit registered in that queue (a group's name is Kafka's or
	// Queen's by its first use). Nothing was applied.
	ErrKafkaGroup = errors.New("cluster: a Kafka consumer group")
)
