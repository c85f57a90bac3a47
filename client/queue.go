package queen

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Queue is a handle on one queue.
type Queue struct {
	c    *Client
	name string
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Push appends messages to the queue in one request, in order, and returns
// one result per message. A message without a TransactionID gets a new
// UUIDv7 here, so that a retried push is deduplicated by the broker rather
// than stored twice. A message the broker refused (status failed) is also
// reported as a *PushError.
func (q *Queue) Push(ctx context.Context, msgs ...Msg) ([]PushResult, error) {
	items := make([]pushItem, len(msgs))
	for i, m := range msgs {
		it, err := toPushItem(q.name, m)
		if err != nil {
			return nil, err
		}
		items[i] = it
	}
	if len(items) == 0 {
		return nil, nil
	}
	res, err := do(ctx, q.c.retry, func(ctx context.Context) ([]PushResult, error) { return q.c.t.push(ctx, items) })
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Status == "failed" {
			return res, &PushError{Index: i, Message: r.Error}
		}
	}
	return res, nil
}

func toPushItem(queue string, m Msg) (pushItem, error) {
	data, err := json.Marshal(m.Data)
	if err != nil {
		return pushItem{}, fmt.Errorf("queen: push to %s: payload: %w", queue, err)
	}
	id := m.TransactionID
	if id == "" {
		id = newTransactionID()
	}
	return pushItem{Queue: queue, Partition: m.Partition, TransactionID: id, TraceID: m.TraceID, Payload: data}, nil
}

// Pop claims up to o.Batch messages for o.Group, waiting up to o.Wait for
// some to arrive. Nothing to deliver is an empty slice, not an error. The
// messages are leased to the caller until it acks them or the lease runs
// out.
func (q *Queue) Pop(ctx context.Context, o PopOptions) ([]*Message, error) {
	return doWait(ctx, q.c.retry, o.Wait, func(ctx context.Context) ([]*Message, error) { return q.c.t.pop(ctx, q.name, o) })
}

// Delete removes the queue with its messages, cursors and leases. KV
// entries stay. Deleting a missing queue is not an error.
func (q *Queue) Delete(ctx context.Context) error {
	_, err := do(ctx, q.c.retry, func(ctx context.Context) (struct{}, error) { return struct{}{}, q.c.t.deleteQueue(ctx, q.name) })
	return err
}

// QueueStats counts a queue's messages over all its partitions.
type QueueStats struct {
	Total      int64 // stored, in any state
	Pending    int64
	Processing int64
	Completed  int64
	Failed     int64
	DeadLetter int64
}

// Stats counts the queue's messages (GET /api/v1/resources/queues/:queue,
// its totals). It is served by the HTTP API only: queen.v1 has no queue
// detail, so over gRPC it fails with UNIMPLEMENTED and sends nothing. A
// queue that does not exist is an *Error with NOT_FOUND.
func (q *Queue) Stats(ctx context.Context) (*QueueStats, error) {
	return do(ctx, q.c.retry, func(ctx context.Context) (*QueueStats, error) { return q.c.t.queueStats(ctx, q.name) })
}

// QueueOption names one option of Configure; options not named keep their
// value.
type QueueOption func(*queueOptions)

func i64(v int64) *int64 { return &v }

// LeaseTime is how long a pop holds its partition (whole seconds).
func LeaseTime(d time.Duration) QueueOption {
	return func(o *queueOptions) { o.leaseTime = i64(int64(d / time.Second)) }
}

// RetryLimit is how many failed deliveries a message may have before it
// goes to the dead-letter queue.
func RetryLimit(n int) QueueOption { return func(o *queueOptions) { o.retryLimit = i64(int64(n)) } }

// RetryDelay is how long a failed message waits before it comes back
// (milliseconds; the broker backs off from it).
func RetryDelay(d time.Duration) QueueOption {
	return func(o *queueOptions) { o.retryDelayMs = i64(d.Milliseconds()) }
}

// DelayedProcessing hides each message for d after it was pushed.
func DelayedProcessing(d time.Duration) QueueOption {
	return func(o *queueOptions) { o.delayedProcessing = i64(int64(d / time.Second)) }
}

// WindowBuffer holds a partition back until its newest message is d old.
func WindowBuffer(d time.Duration) QueueOption {
	return func(o *queueOptions) { o.windowBuffer = i64(int64(d / time.Second)) }
}

// Priority orders queues in a namespace pop (higher first).
func Priority(p int) QueueOption { return func(o *queueOptions) { o.priority = i64(int64(p)) } }

// MaxSize is stored and echoed.
func MaxSize(n int) QueueOption { return func(o *queueOptions) { o.maxSize = i64(int64(n)) } }

// Retention deletes messages older than d (0 = keep), and turns retention on.
func Retention(d time.Duration) QueueOption {
	return func(o *queueOptions) {
		o.retentionSeconds, o.retentionEnabled = i64(int64(d/time.Second)), new(true)
	}
}

// CompletedRetention deletes messages every group consumed once they are
// d old, and turns retention on.
func CompletedRetention(d time.Duration) QueueOption {
	return func(o *queueOptions) {
		o.completedRetentionSeconds, o.retentionEnabled = i64(int64(d/time.Second)), new(true)
	}
}

// MaxWaitTime deletes messages still unconsumed after d.
func MaxWaitTime(d time.Duration) QueueOption {
	return func(o *queueOptions) { o.maxWaitTimeSeconds = i64(int64(d / time.Second)) }
}

// Encryption turns encryption at rest on or off.
func Encryption(on bool) QueueOption { return func(o *queueOptions) { o.encryptionEnabled = &on } }

// Configure creates the queue, or changes the options it names.
func (q *Queue) Configure(ctx context.Context, opts ...QueueOption) error {
	var o queueOptions
	for _, f := range opts {
		f(&o)
	}
	_, err := do(ctx, q.c.retry, func(ctx context.Context) (struct{}, error) { return struct{}{}, q.c.t.configure(ctx, q.name, &o) })
	return err
}
