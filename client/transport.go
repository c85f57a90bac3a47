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
	// queueStats is HTTP only: queen.v1 has no queue detail (Queue.Stats).
	queueStats(ctx context.Context, queue string) (*QueueStats, error)
	timers(ctx context.Context, ops []timerOp) ([]TimerResult, error)
	cancelTimer(ctx context.Context, queue, key, txn string) (*TimerResult, error)
	getTimer(ctx context.Context, queue, key string) (*Timer, error)
	listTimers(ctx context.Context, queue, after string, limit int) (*TimerPage, error)
	countTimers(ctx context.Context, queue, prefix string) (int, error)
	// admin.go's calls (http_admin.go, grpc_admin.go)
	locks(ctx context.Context, ops []lockOp) ([]Lock, error)
	listGroups(ctx context.Context, group string) ([]GroupQueue, error)
	seekGroup(ctx context.Context, group, queue, partition string, at time.Time) (*SeekResult, error)
	deleteGroup(ctx context.Context, group, queue string, keepMetadata bool) (*DeleteGroupResult, error)
	listDeadLetters(ctx context.Context, f DLQFilter) (*DeadLetterPage, error)
	replayDeadLetter(ctx context.Context, dlqID string) (*Replay, error)
	purgeDeadLetters(ctx context.Context, queue, group string) (int, error)
	getMessage(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error)
	traces(ctx context.Context, partitionID, transactionID string) ([]Trace, error)
	health(ctx context.Context) (*Health, error)
	// leaderAddr is the address of the leader's API of this transport's
	// kind, as this node knows it ("" = none known).
	leaderAddr(ctx context.Context) (string, error)
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
	timers         []timerOp
	requiredLeases []string
	idemKey        string // the Idempotency-Key; "" = none
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
	Truncated       bool // getMany: the broker's per-call read limit cut the rows short
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

// timerOp is one timer op (addendum §1.2); op names follow the HTTP API
// (schedule, reschedule, cancel).
type timerOp struct {
	Op, Queue, Key string
	Partition      string  // "" = Default (not sent)
	DelayMs        float64 // schedule, reschedule
	Txn            string  // the fired message's transactionId; on cancel the echo ("" = none)
	Payload        []byte  // schedule, reschedule: the fired message's body (JSON text)
}
