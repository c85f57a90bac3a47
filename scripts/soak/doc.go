// Command soak runs a three-node queen-node cluster under a steady
// produce/consume workload with completedRetentionSeconds set, for a bounded
// time and message count, and shows whether the broker can run for months:
// every few seconds it samples each node's data dir (message store, Raft
// log, state file and snapshots apart), RSS, last snapshot size and
// duration, and the cluster's throughput; it writes them to a CSV and draws
// them in an SVG chart (gonum.org/v1/plot), then reports the slope of each
// curve after the warm-up and times a SIGKILL-and-restart of a node to
// healthy.
//
// The workload: -producers push batches of -batch messages round-robin over
// -partitions partitions (at most -backlog messages ahead of the
// consumers); -consumers pop up to 100 with long polling, settle one
// message in ten through the seed's charge-once transaction (an ack under
// the lease plus a required putIfAbsent of the order's marker, ttlSeconds
// 60) and the rest with one /ack/batch.
//
//	go run ./scripts/soak -messages 5000000 -duration 30m -out soak-out
package main
