package queen

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The operator's calls and the reads beside them, typed, on both
// transports (HTTP routes of spec §4.9–§4.11, addendum §4.3 and §4.13;
// queen.v1's methods of the same names): locks, consumer-group admin, dead
// letters, message lookup and traces, and the node's health.

// ---- Locks (addendum §4.3)

// Locks acquires, renews, releases and reads locks and semaphores.
type Locks struct{ c *Client }

// Locks is the client's locks.
func (c *Client) Locks() *Locks { return &Locks{c: c} }

// Lock is one permit as the broker answered an op on it.
type Lock struct {
	Name string
	// OK: acquired, renewed or released. A lock somebody else holds is
	// OK=false with Reason "held" (acquire) or "lost" (renew, release),
	// never an error.
	OK        bool
	Reason    string
	Slot      uint32
	Token     uint64 // the fencing token: higher for every later holder
	Owner     string
	Already   bool // acquire: this owner held the permit already
	Since     time.Time
	ExpiresAt time.Time
	// Guard is the KV check a transaction carries to commit only while the
	// permit is still this holder's: a kv op {"op":"check","ns","key","expect","required":true}.
	GuardNS, GuardKey string
	GuardExpect       uint64
	Held              bool         // get: anybody holds it
	Holders           []LockHolder // get, and a refused acquire: who holds it
}

// LockHolder is one holder of a lock.
type LockHolder struct {
	Slot      uint32
	Owner     string
	Token     uint64
	Since     time.Time
	ExpiresAt time.Time
}

// lockOp is one op on the wire.
type lockOp struct {
	Op          string // acquire | renew | release | get
	Name, Owner string
	Limit       int
	TTL         int64 // seconds
	Token       uint64
	Slot        uint32
}

// LockOption sets an acquire's owner or permit count.
type LockOption func(*lockOp)

// WithOwner names the caller: an acquire retried by the same owner gets
// the permit it already holds (Already) rather than a second one.
func WithOwner(owner string) LockOption { return func(o *lockOp) { o.Owner = owner } }

// WithPermits makes the lock a semaphore of n permits (1..1024).
func WithPermits(n int) LockOption { return func(o *lockOp) { o.Limit = n } }

func (l *Locks) one(ctx context.Context, op lockOp) (*Lock, error) {
	res, err := do(ctx, l.c.retry, func(ctx context.Context) ([]Lock, error) { return l.c.t.locks(ctx, []lockOp{op}) })
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, &Error{Message: fmt.Sprintf("locks answered %d results for 1 op", len(res))}
	}
	return &res[0], nil
}

// Acquire takes a permit of name for ttl (whole seconds, at least one).
func (l *Locks) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	op := lockOp{Op: "acquire", Name: name, TTL: int64(ttl / time.Second)}
	for _, o := range opts {
		o(&op)
	}
	return l.one(ctx, op)
}

// Renew extends a held permit for ttl from now.
func (l *Locks) Renew(ctx context.Context, held *Lock, ttl time.Duration) (*Lock, error) {
	return l.one(ctx, lockOp{Op: "renew", Name: held.Name, Owner: held.Owner, Token: held.Token, Slot: held.Slot, TTL: int64(ttl / time.Second)})
}

// Release gives a held permit back.
func (l *Locks) Release(ctx context.Context, held *Lock) (*Lock, error) {
	return l.one(ctx, lockOp{Op: "release", Name: held.Name, Owner: held.Owner, Token: held.Token, Slot: held.Slot})
}

// Get reads who holds name.
func (l *Locks) Get(ctx context.Context, name string) (*Lock, error) {
	return l.one(ctx, lockOp{Op: "get", Name: name})
}

// ---- Consumer groups (spec §4.11)

// Groups administers consumer groups.
type Groups struct{ c *Client }

// Groups is the client's consumer-group admin.
func (c *Client) Groups() *Groups { return &Groups{c: c} }

// GroupQueue is where one group stands in one queue.
type GroupQueue struct {
	Group, Queue          string
	SubscriptionMode      string // all | timestamp | "" (never subscribed)
	SubscriptionTimestamp time.Time
	Partitions            []GroupPartition
}

// GroupPartition is a group's cursor in one partition.
type GroupPartition struct {
	Partition, PartitionID       string
	ConsumedOffset, NewestOffset uint64
	Pending                      uint64 // live messages after the cursor
	Lag                          time.Duration
	LeaseExpiresAt               time.Time // zero: no live lease
	RetryCount                   uint32
}

// SeekResult is what a seek moved.
type SeekResult struct {
	PartitionsUpdated int
	CursorMovedTo     time.Time // a partition's seek: the message the cursor sits on
}

// DeleteGroupResult is what a group deletion removed.
type DeleteGroupResult struct {
	DeletedPartitions int
	MetadataDeleted   bool
}

// List lists (group, queue) rows, queue mode included (group "" = every group).
func (g *Groups) List(ctx context.Context, group string) ([]GroupQueue, error) {
	return do(ctx, g.c.retry, func(ctx context.Context) ([]GroupQueue, error) { return g.c.t.listGroups(ctx, group) })
}

// SeekToEnd moves group's cursors in queue (one partition's, when named)
// to the end: what is there now is skipped.
func (g *Groups) SeekToEnd(ctx context.Context, group, queue, partition string) (*SeekResult, error) {
	return do(ctx, g.c.retry, func(ctx context.Context) (*SeekResult, error) {
		return g.c.t.seekGroup(ctx, group, queue, partition, time.Time{})
	})
}

// SeekTo moves group's cursors in queue to the last message created at or
// before at (backwards replays, forwards skips).
func (g *Groups) SeekTo(ctx context.Context, group, queue string, at time.Time) (*SeekResult, error) {
	if at.IsZero() {
		return nil, &Error{Message: "SeekTo needs a time (SeekToEnd moves to the end)"}
	}
	return do(ctx, g.c.retry, func(ctx context.Context) (*SeekResult, error) { return g.c.t.seekGroup(ctx, group, queue, "", at) })
}

// Delete deletes group's cursors in queue ("" = every queue), and its
// subscription record unless keepMetadata (admin).
func (g *Groups) Delete(ctx context.Context, group, queue string, keepMetadata bool) (*DeleteGroupResult, error) {
	return do(ctx, g.c.retry, func(ctx context.Context) (*DeleteGroupResult, error) {
		return g.c.t.deleteGroup(ctx, group, queue, keepMetadata)
	})
}

// ---- Dead letters (spec §4.10)

// DeadLetters lists, replays and purges dead letters.
type DeadLetters struct{ c *Client }

// DeadLetters is the client's dead-letter admin.
func (c *Client) DeadLetters() *DeadLetters { return &DeadLetters{c: c} }

// DLQFilter selects dead letters; zero fields select all.
type DLQFilter struct {
	Queue, ConsumerGroup, Partition string
	From, To                        time.Time
	Limit, Offset                   int // Limit 0 = 100
}

// DeadLetterRecord is one dead letter.
type DeadLetterRecord struct {
	DlqID, MessageID, TransactionID, PartitionID string
	Queue, Partition, ConsumerGroup, Error       string
	RetryCount                                   int
	Data                                         json.RawMessage
	CreatedAt, FailedAt                          time.Time
}

// DeadLetterPage is a page of dead letters and how many match in all.
type DeadLetterPage struct {
	DeadLetters []DeadLetterRecord
	Total       int64
}

// Replay is a replayed dead letter: the new message it became.
type Replay struct {
	Verdict                                  string // moved | duplicate | full
	Queue, Partition, PartitionID, MessageID string
	TransactionID                            string // dlq:<dlqId>
}

// List reads a page of dead letters, newest failure first.
func (d *DeadLetters) List(ctx context.Context, f DLQFilter) (*DeadLetterPage, error) {
	return do(ctx, d.c.retry, func(ctx context.Context) (*DeadLetterPage, error) { return d.c.t.listDeadLetters(ctx, f) })
}

// Replay puts the dead letter dlqID back into its partition as a new
// message (every group of the queue receives it). A second replay of it
// is a NotFound error.
func (d *DeadLetters) Replay(ctx context.Context, dlqID string) (*Replay, error) {
	return do(ctx, d.c.retry, func(ctx context.Context) (*Replay, error) { return d.c.t.replayDeadLetter(ctx, dlqID) })
}

// Purge deletes queue's dead letters for good (one group's when named;
// admin), and reports how many.
func (d *DeadLetters) Purge(ctx context.Context, queue, group string) (int, error) {
	return do(ctx, d.c.retry, func(ctx context.Context) (int, error) { return d.c.t.purgeDeadLetters(ctx, queue, group) })
}

// ---- Messages and traces (spec §4.9, §4.15)

// MessageInfo is one stored message with its status.
type MessageInfo struct {
	ID, TransactionID, PartitionID, Queue, Partition string
	Status                                           string // pending | processing | completed | dead_letter
	Data                                             json.RawMessage
	CreatedAt                                        time.Time
}

// Trace is one trace event of a message.
type Trace struct {
	ID, EventType, ConsumerGroup, WorkerID string
	Names                                  []string
	Data                                   json.RawMessage
	CreatedAt                              time.Time
}

// Message reads the message a (partitionId, transactionId) names; a
// message that is not there is a NotFound error.
func (c *Client) Message(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error) {
	return do(ctx, c.retry, func(ctx context.Context) (*MessageInfo, error) {
		return c.t.getMessage(ctx, partitionID, transactionID)
	})
}

// Traces lists a message's trace events, oldest first.
func (c *Client) Traces(ctx context.Context, partitionID, transactionID string) ([]Trace, error) {
	return do(ctx, c.retry, func(ctx context.Context) ([]Trace, error) { return c.t.traces(ctx, partitionID, transactionID) })
}

// ---- Health (addendum §4.13)

// Health is a node's view of the cluster.
type Health struct {
	NodeID, Status, Role, LeaderID string // Status: healthy | settling | damaged
	Term, Commit, Applied          uint64
	StorageReady                   bool
}

// Health reads the health of the node the client talks to.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	return do(ctx, c.retry, func(ctx context.Context) (*Health, error) { return c.t.health(ctx) })
}
