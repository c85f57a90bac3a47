// Command pagecost measures what it costs this machine's CPU to write a
// replica's bytes into the page cache: the write pattern of one queen-node
// replica under batched push, without the broker. Each batch appends a
// Raft-log-sized write to one file and fsyncs it (raft-wal), then appends a
// record run and an index run to each of -parts partitions (the message
// files of package msgstore, not synced). It prints the process's CPU
// (user + system, from getrusage) per message.
//
//	go run ./scripts/pagecost                     # alone
//	go run ./scripts/pagecost -cap 0.45           # in a cgroup capped like a scale-out node (root)
//
// Run it alone, then beside `go run ./scripts/bench -scenario scaleout`:
// the difference is what the same copies cost when every core is busy.
// The defaults are the scale-out bench's shapes: 256-byte payloads (about
// 400 bytes an entry in the log, 311 a record, 32 an index entry), 16
// partitions, 300 messages a batch.
package main
