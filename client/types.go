package queen

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// Message is one delivered message. Ack, Nack and a committed transaction
// that acks it mark it settled; a Consumer acks only what its handler left
// unsettled.
type Message struct {
	ID            string
	TransactionID string
	TraceID       string
	Data          json.RawMessage // the payload's JSON text ("null" when none)
	Queue         string
	Partition     string
	PartitionID   string
	LeaseID       string // "" when popped with AutoAck
	ConsumerGroup string // "__QUEUE_MODE__" without a group
	RetryCount    int
	CreatedAt     time.Time
	// LeaseExpiresAt is when the batch's lease runs out unless renewed.
	LeaseExpiresAt time.Time

	settled atomic.Bool
}

// Decode unmarshals the payload into v.
func (m *Message) Decode(v any) error { return json.Unmarshal(m.Data, v) }

// Settled reports whether the message was acked or nacked through this
// client (directly or in a committed transaction).
func (m *Message) Settled() bool { return m.settled.Load() }

// Msg is one message to push.
type Msg struct {
	Data          any    // marshalled with encoding/json; json.RawMessage is sent as is
	TransactionID string // the dedup key within a partition; "" = a new UUIDv7
	Partition     string // "" = "Default"
	TraceID       string // "" or a UUID
}

// PushResult is the broker's verdict on one pushed message.
type PushResult struct {
	Status        string // queued | duplicate | buffered | failed
	TransactionID string
	MessageID     string // a duplicate's is the original's
	PartitionID   string
	Error         string // why a failed item was refused
}

// AckStatus is how a message is settled.
type AckStatus string

// Ack statuses (spec §5.4).
const (
	Completed  AckStatus = "completed"
	Failed     AckStatus = "failed" // spends a retry; comes back after the queue's retryDelay
	Retry      AckStatus = "retry"  // releases the lease without spending a retry
	DeadLetter AckStatus = "dlq"    // straight to the dead-letter queue
)

// AckResult is the broker's verdict on one ack.
type AckResult struct {
	TransactionID string
	Success       bool
	Error         string // "Message not found", "Invalid or expired lease", ...
	LeaseReleased bool
	DLQ           bool
}

// SubscriptionMode is where a consumer group's first pop of a queue starts.
type SubscriptionMode string

// Subscription modes (spec §5.7).
const (
	SubscribeDefault SubscriptionMode = ""    // the broker's default (new, unless configured otherwise)
	SubscribeAll     SubscriptionMode = "all" // from the beginning
	SubscribeNew     SubscriptionMode = "new" // only messages pushed from now on
)

// PopOptions shape one pop.
type PopOptions struct {
	Group            string // "" = queue mode
	Partition        string // "" = any partition
	Batch            int    // at most this many messages; 0 = 1
	Partitions       int    // claim up to this many partitions; 0 = 1
	Wait             time.Duration
	AutoAck          bool
	Subscription     SubscriptionMode
	SubscriptionFrom time.Time // a new group starts after this time (overrides Subscription)
	LeaseTime        time.Duration
}

// KVEntry is a read KV entry.
type KVEntry struct {
	Key       string
	Found     bool
	Value     json.RawMessage
	Version   uint64
	ExpiresAt time.Time // zero = forever
}

// Decode unmarshals the entry's value into v.
func (e *KVEntry) Decode(v any) error { return json.Unmarshal(e.Value, v) }

// KVRows is a getMany result.
type KVRows struct {
	Rows    []KVEntry
	Missing []string
	// Truncated: the broker's read limit per call cut the answer short; the
	// keys in neither Rows nor Missing were not read.
	Truncated bool
}

// KVWrite is the verdict on one KV write. A write that lost its
// precondition is Applied=false with a Reason (exists, absent, version,
// limit, type), never an error.
type KVWrite struct {
	Key     string
	Applied bool
	Reason  string
	Version uint64
	Value   json.RawMessage // the current value
}
