// Package kafka is the node's Kafka protocol listener (--kafka-addr): Kafka
// producers and consumers (franz-go, librdkafka/kcat, the Java client)
// work against queen-node unchanged. The wire is decoded and encoded by
// franz-go's kmsg; the listener, the connection loop and the mapping onto
// queen-node are here, and every write goes through the node's one write
// pipeline (authorisation, scopes, stamping, audit, outcome).
//
// The mapping (DESIGN.md has the reasons):
//   - a topic is a queue whose partitions are named "0".."n-1"; Kafka
//     partition n is the queue's partition "n"; other queues are not
//     topics;
//   - a record's offset is its message's offset (seq) in the partition, the
//     same number a Queen push result or pop reports; the first is 1;
//   - a record is stored as a kafkamsg frame (key, value, headers,
//     timestamp, byte for byte); a Queen pop sees its value as JSON, or
//     {"$base64": ...} when the value is not JSON text;
//   - a consumer group's committed offset is its Queen position
//     (addendum §4.2), so the Queen views and seek see Kafka groups;
//   - idempotent producers' sequences are checked in apply (package
//     producers), and a transaction's records and offsets are one entry;
//   - a connection's tenant is its SASL token's tenant claim (the default
//     tenant without one); consumer groups and transactional ids are keyed
//     by (tenant, name), and coordinated by the leader of the tenant's
//     Raft group.
//
// Files: server.go (listener, connection loop, dispatch), versions.go,
// sasl.go, metadata.go, produce.go, batches*.go (record batches), fetch.go,
// offsets.go, groups*.go (membership), txn.go, topics.go, errors.go.
package kafka
