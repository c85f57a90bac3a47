// Package producers keeps the state of the Kafka listener's producers in
// the state file, so that every replica judges a producer's batches the
// same way and a retry that reaches a new leader after a failover is still
// recognised: producer ids and epochs (InitProducerId), transactional ids,
// and per (producer, partition) the last five batches appended, by their
// sequence numbers and first offset, as a Kafka broker keeps them.
//
// A producer is kept while it is used; one idle past the time its last
// command named is removed by the sweep, and past the cap the least
// recently used goes first. Codes in results are Kafka's (kerr), because
// they are what the listener answers; nothing here knows the wire.
package producers
