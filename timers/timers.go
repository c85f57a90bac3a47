package timers

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Buckets of the state file the timers own.
var (
	bTimers   = store.Bucket("timers")    // queue 0 timerKey → TimerRecord
	bTimerDue = store.Bucket("timer_due") // due queue 0 timerKey → nil
)

// Buckets lists them, for store.Open.
var Buckets = []store.Bucket{bTimers, bTimerDue}

// Pusher is where a fired timer goes: the queue domain's push path (dedup
// by txn included) and its dead-letter list.
type Pusher interface {
	Push(it *command.PushItem) *command.PushItemResult
	DeadLetter(queue, partition string, rec *command.DLQRecord)
}

// Tx is one command's view of the timers.
type Tx struct {
	tx  *store.Tx
	now int64
	q   Pusher
}

// Begin starts a command at entry time now; q takes fired messages.
func Begin(tx *store.Tx, now int64, q Pusher) *Tx { return &Tx{tx: tx, now: now, q: q} }

func join(a, b string) []byte {
	k := make([]byte, 0, len(a)+1+len(b))
	k = append(k, a...)
	k = append(k, 0)
	return append(k, b...)
}

func splitJoined(k []byte) (string, string) {
	for i, c := range k {
		if c == 0 {
			return string(k[:i]), string(k[i+1:])
		}
	}
	return string(k), ""
}

// Fire limits.
const (
	// MaxAttempts permanent refusals make a timer a dead letter.
	MaxAttempts     = 5
	timerBackoffMin = int64(1e6)  // µs
	timerBackoffMax = int64(60e6) // µs

	defaultFireLimit = 256
	defaultFireBytes = 4 << 20
)

func timerRecKey(queue, key string) []byte { return join(queue, key) }

func timerDueKey(due int64, queue, key string) []byte {
	k := make([]byte, 8, 8+len(queue)+1+len(key))
	binary.BigEndian.PutUint64(k, uint64(due))
	return append(k, timerRecKey(queue, key)...)
}

// timerDue is when a timer may fire.
func timerDue(t *command.TimerRecord) int64 { return max(t.DeliverAtUs, t.BackoffUntilUs) }

func (c *Tx) timer(queue, key string) *command.TimerRecord {
	v := c.tx.Get(bTimers, timerRecKey(queue, key))
	if v == nil {
		return nil
	}
	t := &command.TimerRecord{}
	command.MustDecodeRecord(v, t)
	return t
}

func (c *Tx) putTimer(t *command.TimerRecord) {
	c.tx.Put(bTimers, timerRecKey(t.Queue, t.TimerKey), command.MustEncodeRecord(t))
	c.tx.Put(bTimerDue, timerDueKey(timerDue(t), t.Queue, t.TimerKey), nil)
}

func (c *Tx) deleteTimer(t *command.TimerRecord) {
	c.tx.Delete(bTimers, timerRecKey(t.Queue, t.TimerKey))
	c.tx.Delete(bTimerDue, timerDueKey(timerDue(t), t.Queue, t.TimerKey))
}

// Schedules reports whether any op schedules (cancels are always allowed:
// the operator's schedule switch never refuses them).
func Schedules(ops []*command.TimerOp) bool {
	for _, op := range ops {
		if op.Kind != command.TimerOp_CANCEL {
			return true
		}
	}
	return false
}

// Conflict is the index of the first schedule among ops that its client
// marked encrypted for a queue that encrypts at rest (encrypts), or -1:
// the broker owns that flag there (addendum §1.2), and the call is refused
// whole. A payload the leader sealed is marked encrypted too, and is no
// conflict.
func Conflict(ops []*command.TimerOp, encrypts func(queue string) bool) int {
	for i, op := range ops {
		if op.Kind != command.TimerOp_CANCEL && op.Encrypted && !atrest.Sealed(op.Payload) && encrypts(op.Queue) {
			return i
		}
	}
	return -1
}

// Op applies one schedule, reschedule or cancel (the i-th of its call).
func (c *Tx) Op(i int, op *command.TimerOp) *command.TimerResult {
	r := &command.TimerResult{Queue: op.Queue, TimerKey: op.TimerKey, OpIndex: uint32(i)}
	old := c.timer(op.Queue, op.TimerKey)
	if op.Kind == command.TimerOp_CANCEL {
		if old == nil {
			r.Status, r.Txn = command.TimerResult_ABSENT, op.Txn // "not pending now", nothing more
			return r
		}
		c.deleteTimer(old)
		r.Ok, r.Status, r.Txn = true, command.TimerResult_CANCELLED, old.Txn
		return r
	}
	partition := op.Partition
	if partition == "" {
		partition = "Default"
	}
	t := &command.TimerRecord{
		Queue: op.Queue, TimerKey: op.TimerKey, Partition: partition,
		DeliverAtUs: c.now + max(op.DelayUs, 0), Txn: op.Txn, MessageId: op.MessageId,
		Payload: op.Payload, Encrypted: op.Encrypted, ProducerSub: op.ProducerSub,
		CreatedUs: c.now, UpdatedUs: c.now,
	}
	r.Status = command.TimerResult_SCHEDULED
	if old != nil {
		c.deleteTimer(old) // replaced whole; only its creation time is kept
		t.CreatedUs = old.CreatedUs
		r.Status = command.TimerResult_RESCHEDULED
	}
	c.putTimer(t)
	r.Ok, r.Txn, r.MessageId, r.DeliverAtUs = true, t.Txn, t.MessageId, t.DeliverAtUs
	return r
}

// Fire fires the timers due by the entry's time, earliest first, within
// the limits of in.
func (c *Tx) Fire(in *command.FireTimers) *command.FireResult {
	res := &command.FireResult{}
	limit, maxBytes := int(in.Limit), int(in.MaxBytes)
	if limit <= 0 {
		limit = defaultFireLimit
	}
	if maxBytes <= 0 {
		maxBytes = defaultFireBytes
	}
	var due []*command.TimerRecord
	var stale [][]byte
	bytesUsed := 0
	cur := c.tx.Cursor(bTimerDue)
	k, _ := cur.First()
	for ; k != nil && int64(binary.BigEndian.Uint64(k[:8])) <= c.now; k, _ = cur.Next() {
		if len(due) == limit {
			break
		}
		q, key := splitJoined(k[8:])
		t := c.timer(q, key)
		if t == nil || timerDue(t) != int64(binary.BigEndian.Uint64(k[:8])) {
			stale = append(stale, append([]byte(nil), k...))
			continue
		}
		if len(due) > 0 && bytesUsed+len(t.Payload) > maxBytes {
			break // one timer always goes, however large
		}
		bytesUsed += len(t.Payload)
		due = append(due, t)
	}
	res.More = k != nil && int64(binary.BigEndian.Uint64(k[:8])) <= c.now
	for _, sk := range stale {
		c.tx.Delete(bTimerDue, sk)
	}
	for _, t := range due {
		c.fire(t, res)
	}
	return res
}

// fire appends one timer's message through the push path and deletes the
// timer; a refused append backs off, and the fifth refusal files a dead
// letter under the group __timer__.
func (c *Tx) fire(t *command.TimerRecord, res *command.FireResult) {
	r := c.q.Push(&command.PushItem{Queue: t.Queue, Partition: t.Partition, TransactionId: t.Txn,
		Payload: t.Payload, MessageId: t.MessageId, ProducerSub: t.ProducerSub})
	if r.Status != command.PushItemResult_FAILED {
		// Appended, or absorbed by dedup (the txn is already there):
		// either way the timer has delivered.
		c.deleteTimer(t)
		res.Fired++
		res.LatenessUs = append(res.LatenessUs, c.now-timerDue(t))
		return
	}
	c.deleteTimer(t) // re-put below under its new due time, or dropped
	t.Attempts++
	t.LastError = "push_refused: " + r.Error
	t.UpdatedUs = c.now
	if t.Attempts >= MaxAttempts {
		c.timerDeadLetter(t)
		res.Dead++
		return
	}
	backoff := timerBackoffMin << (t.Attempts - 1)
	t.BackoffUntilUs = c.now + min(backoff, timerBackoffMax)
	c.putTimer(t)
	res.Deferred++
}

// timerDeadLetter files a timer that could not fire in its destination
// queue's DLQ (which creates the queue and partition so the row can be
// found).
func (c *Tx) timerDeadLetter(t *command.TimerRecord) {
	payload := t.Payload
	if !json.Valid(payload) {
		payload, _ = json.Marshal(map[string]string{"_raw_b64": base64.StdEncoding.EncodeToString(t.Payload)})
	}
	c.q.DeadLetter(t.Queue, t.Partition, &command.DLQRecord{
		MessageId: t.MessageId, TransactionId: t.Txn, ConsumerGroup: command.TimerDLQGroup, Error: t.LastError,
		RetryCount: t.Attempts, Payload: payload, ProducerSub: t.ProducerSub,
		CreatedUs: t.CreatedUs, FailedUs: c.now,
	})
}

// Reader answers questions about pending timers from one view of the state.
type Reader struct{ r store.Reader }

// NewReader reads through r.
func NewReader(r store.Reader) *Reader { return &Reader{r: r} }

// Timer returns a pending timer, or nil.
func (rd *Reader) Timer(queue, key string) *command.TimerRecord {
	if v := rd.r.Get(bTimers, timerRecKey(queue, key)); v != nil {
		t := &command.TimerRecord{}
		command.MustDecodeRecord(v, t)
		return t
	}
	return nil
}

// Timers lists a queue's pending timers in timerKey byte order, after the
// exclusive cursor `after`, at most limit; truncated says more follow.
func (rd *Reader) Timers(queue, after string, limit int) (rows []*command.TimerRecord, truncated bool) {
	pfx := append([]byte(queue), 0)
	start := pfx
	if after != "" {
		start = append(timerRecKey(queue, after), 0)
	}
	c := rd.r.Cursor(bTimers)
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
		if len(rows) == limit {
			return rows, true
		}
		t := &command.TimerRecord{}
		command.MustDecodeRecord(v, t)
		rows = append(rows, t)
	}
	return rows, false
}

// TimerCount counts a queue's pending timers whose key starts with keyPrefix.
func (rd *Reader) TimerCount(queue, keyPrefix string) int {
	pfx := timerRecKey(queue, keyPrefix)
	n := 0
	c := rd.r.Cursor(bTimers)
	for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
		n++
	}
	return n
}

// NextDue is the due time of the earliest pending timer (0: none).
func (rd *Reader) NextDue() int64 {
	k, _ := rd.r.Cursor(bTimerDue).First()
	if k == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(k[:8]))
}
