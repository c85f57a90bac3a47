package queen

import (
	"context"
	"encoding/json"
	"time"
)

// transport is one wire: the Queen HTTP API (http.go) or queen.v1 over gRPC
// (grpc.go). Both take and return the neutral types below; the Client adds
// retries, ids and settling on top, the same for both.
type transport interface {
	push(ctx context.Context, items []pushItem) ([]PushResult, error)
	pop(ctx context.Context, queue string, o PopOptions) ([]*Message, error)
	ack(ctx context.Context, group string, item ackItem) ([]AckResult, error)
	ackBatch(ctx context.Context, group string, items []ackItem) ([]AckResult, error)
	extend(ctx context.Context, leaseID string, seconds int64) (extendResult, error)
	transaction(ctx context.Context, req *txnRequest) (*TxResult, error)
	kv(ctx context.Context, ops []kvOp) (*kvResponse, error)
	configure(ctx context.Context, queue string, o *queueOptions) error
	deleteQueue(ctx context.Context, queue string) error
	close() error
}

type pushItem struct {
	Queue, Partition, TransactionID, TraceID string
	Payload                                  json.RawMessage
}

type ackItem struct {
	TransactionID, PartitionID, LeaseID, Group string
	Status                                     AckStatus
	Error                                      *string
}

type extendResult struct {
	Success   bool
	Error     string
	ExpiresAt time.Time
}

// txnOp is one operation: an ack or a push.
type txnOp struct {
	ack  *ackItem
	push *pushItem
}

type txnRequest struct {
	ops            []txnOp
	kv             []kvOp
	requiredLeases []string
}

// kvOp is one KV op; op names follow the HTTP API (get, getMany, put,
// putIfAbsent, delete).
type kvOp struct {
	Op       string
	NS, Key  string
	Keys     []string
	Value    json.RawMessage // nil = none
	TTL      time.Duration   // <= 0 = forever (writes that store a value)
	Expect   *uint64
	Required bool
}

// kvResult is one op's result, reads and writes alike.
type kvResult struct {
	Op, Key, Reason string
	Found, Applied  bool
	Value           json.RawMessage
	Version         uint64
	ExpiresAt       time.Time
	Rows            []KVEntry
	Missing         []string
}

type kvResponse struct {
	OK          bool
	Reason      string
	FailedIndex int
	Failed      *kvResult
	Results     []kvResult
}

// queueOptions are the options a Configure names; nil fields keep their
// value (configure merges).
type queueOptions struct {
	leaseTime, retryLimit, retryDelayMs, maxSize, delayedProcessing, windowBuffer  *int64
	priority, ttl, retentionSeconds, completedRetentionSeconds, maxWaitTimeSeconds *int64
	retentionEnabled, deadLetterQueue, encryptionEnabled                           *bool
}
