// Package raftlog opens the durable parts of a node's Raft: the log and
// stable store (raft-boltdb/v2, one bbolt file, fsynced per batch), the file
// snapshot store and the TCP transport, and builds the raft.Config the node
// runs with.
package raftlog
