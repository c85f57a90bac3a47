// Package msgstore keeps message bodies in append-only segment files, one
// directory per partition, beside the state file (Kafka's layout; NATS
// keeps blocks per stream). The state machine (package queue) decides what
// is appended and where a partition ends; this package only stores bytes:
//
//	<dir>/<partition id>/<first seq, 20 digits>.log   the records, back to back
//	<dir>/<partition id>/<first seq, 20 digits>.index 32 bytes per record: offset,
//	                                                  length, createdAt, txn hash,
//	                                                  the record's CRC-32C, and the
//	                                                  entry's own CRC-32C
//
// A partition's seqs are contiguous, so the index entry of seq s in a
// segment with first seq b is entry s-b: a lookup is one read. Every
// replica appends the same records in the same order, so files are
// byte-identical across replicas, and a segment is rolled at the same record
// everywhere (SegmentBytes).
//
// Writes of one Raft batch go to memory first (Batch) and reach the files
// in one write per file at Flush, which the state machine calls just before
// the state file commits the batch; a command refused as a whole rolls its
// own writes back (Stage). The files are not synced on commit: the Raft log
// is the record, Sync runs before a snapshot is taken, and a partition is
// trimmed back to what the state file committed (Trim) before it is written
// again after a crash. Retention and deleted queues reclaim space by
// removing whole files, never by rewriting them.
//
// Every read checks what it read: an index entry against its own checksum,
// a record against the checksum its entry holds. A mismatch is a
// *CorruptError (ErrCorrupt), never the bytes: a flipped bit on this node's
// disk is not served. Index files of state format 3 (.idx, no checksums)
// are rewritten with them when the store opens, or when a snapshot of that
// format is restored (migrateLegacy).
package msgstore
