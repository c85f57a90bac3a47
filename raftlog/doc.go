// Package raftlog opens the durable parts of a node's Raft: the log
// (hashicorp/raft-wal by default: segment files, one fsync per append; or
// raft-boltdb/v2's raft.db, a bbolt commit with two fsyncs per append,
// --raft-log bolt), moving a log found in the other store at open; the
// stable store (term and vote, raft-boltdb/v2 either way); the file
// snapshot store and the TCP transport; and the raft.Config the node runs
// with.
package raftlog
