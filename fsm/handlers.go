package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/producers"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/streams"
	"github.com/queen-node/queen-node/timers"
)

// The handlers: each decodes its command and calls its domain.

// applyPush appends the items, or holds them in the push buffer while push
// maintenance is on or earlier pushes still wait there (spec §4.14), so
// that pushes are appended in the order they came.
func applyPush(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	items := cmd.GetPush().Items
	res := &command.PushResult{Items: make([]*command.PushItemResult, len(items))}
	buffer := c.meta.PushMaintenance || c.q.Buffered()
	if !buffer {
		c.q.PrefetchDedup(items)
	}
	for i, it := range items {
		if buffer {
			res.Items[i] = c.q.Buffer(it)
			c.meta.Buffered++
			continue
		}
		res.Items[i] = c.q.Push(it)
	}
	return res, true
}

// applyDrainBuffer appends a bounded step of the push buffer once push
// maintenance is off (the leader proposes steps until it is empty).
func applyDrainBuffer(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if c.meta.PushMaintenance || !c.q.Buffered() {
		return &command.DrainResult{Remaining: c.meta.Buffered}, true
	}
	limit := int(cmd.GetDrainBuffer().Limit)
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	n := c.q.Drain(limit)
	c.meta.Buffered -= min(c.meta.Buffered, uint64(n))
	if n < limit && len(c.meta.Tenants) == 0 {
		c.meta.Buffered = 0 // the buffer is empty whatever the count said
	}
	return &command.DrainResult{Appended: uint32(n), Remaining: c.meta.Buffered}, true
}

func applyDeleteGroup(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.DeleteGroup(cmd.GetDeleteGroup()), true
}

func applySetSubscription(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.SetSubscription(cmd.GetSetSubscription()), true
}

// seekRefusal: a seek that names a queue or partition this view does not
// hold is answered without an entry.
func seekRefusal(rd *Reader, cmd *command.Command) proto.Message {
	s := cmd.GetSeek()
	if rd.Queue(s.Queue) == nil {
		return &command.SeekResult{}
	}
	if s.OnePartition && !rd.HasPartition(s.Queue, s.Partition) {
		return &command.SeekResult{QueueFound: true}
	}
	return nil
}

// applySeek moves a group; a seek that finds no queue (or no partition)
// keeps nothing, so it leaves no audit record either.
func applySeek(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetSeek()
	res := c.q.Seek(in)
	return res, res.QueueFound && (!in.OnePartition || res.PartitionFound)
}

func applyPop(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.Pop(cmd.GetPop(), c.meta.PopMaintenance, ConflationRuleOf(cmd)), true
}

// ConflationRuleOf is the conflation rule an entry applies: the group's
// policy from log format 4 on, the queue's before (addendum §8, corrected).
func ConflationRuleOf(cmd *command.Command) queue.ConflationRule {
	if cmd.Format != 0 && cmd.Format < command.GroupPolicyLogFormat {
		return queue.QueuePolicy
	}
	return queue.GroupPolicy
}

func applyAck(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return &command.AckResult{Items: c.q.Acks(cmd.GetAck().Items, false, nil)}, true
}

func applyExtendLease(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.ExtendLease(cmd.GetExtendLease()), true
}

func applyConfigure(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.Configure(cmd.GetConfigure()), true
}

func applyDeleteQueue(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.DeleteQueue(cmd.GetDeleteQueue().Queue), true
}

const defaultSweepLimit = 1000

// applySweep collects, in bounded steps, what entry time has made dead:
// expired leases, expired KV entries and idempotency records, and the
// records of deleted queues. Every candidate is re-checked by its domain,
// so a sweep proposed late or twice changes nothing it should not.
func applySweep(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	limit := int(cmd.GetSweep().Limit)
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	res := &command.SweepResult{}
	n, more := c.q.SweepLeases(limit)
	res.Leases, res.More = uint32(n), more
	n, more = kvstore.Sweep(c.tx, c.now, limit)
	res.Kv, res.More = uint32(n), res.More || more
	n, more = idempotency.Sweep(c.tx, c.now, limit)
	res.Idempotency, res.More = uint32(n), res.More || more
	n, more = c.q.SweepGraveyard(limit)
	res.Messages, res.More = uint32(n), res.More || more
	n, more = streams.Sweep(c.tx, limit)
	res.StreamRows, res.More = uint32(n), res.More || more
	n, more = producers.Sweep(c.tx, c.now, limit)
	res.KafkaProducers, res.More = uint32(n), res.More || more
	return res, true
}

// defaultIndexLimit is how many dead letters one IndexDeadLetters step
// visits when the command names no limit.
const defaultIndexLimit = 1000

// applyIndexDeadLetters is one step of the dead letters' message-index
// backfill (command.IndexDeadLetters): it resumes where the state says the
// last step stopped, and the step that finds no record left marks the
// index complete, so the leader proposes no more.
func applyIndexDeadLetters(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if c.meta.DeadLettersIndexed {
		return &command.IndexDeadLettersResult{}, true
	}
	limit := int(cmd.GetIndexDeadLetters().Limit)
	if limit <= 0 {
		limit = defaultIndexLimit
	}
	n, last, more := c.q.IndexDeadLetters(c.meta.DeadLettersIndexAfter, limit)
	if more {
		c.meta.DeadLettersIndexAfter = last
	} else {
		c.meta.DeadLettersIndexed, c.meta.DeadLettersIndexAfter = true, nil
	}
	return &command.IndexDeadLettersResult{Indexed: uint32(n), More: more}, true
}

// applyRetain is one step of a retention pass (spec §5.9): the queue
// domain decides, by entry time, what each partition gives up.
func applyRetain(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return c.q.Retain(cmd.GetRetain()), true
}

// applyTimerBatch is POST /api/v1/timers: independent ops, one entry. While
// the operator has scheduling switched off, a call with any schedule is
// refused whole (never half applied).
func applyTimerBatch(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	ops := cmd.GetTimers().Ops
	if off := timersSwitchedOff(c.meta, cmd); off != nil {
		return off, false
	}
	if at := timers.Conflict(ops, c.q.Encrypts); at >= 0 {
		return &command.TimerBatchResult{Reason: command.Reason_BAD_REQUEST, FailedIndex: int32(at)}, false
	}
	t := c.timers()
	res := &command.TimerBatchResult{}
	for i, op := range ops {
		res.Results = append(res.Results, t.Op(i, op))
	}
	return res, true
}

// timersAccess: a write-only (producer) token schedules timers but never
// cancels one.
func timersAccess(cmd *command.Command) Access {
	for _, op := range cmd.GetTimers().Ops {
		if op.Kind == command.TimerOp_CANCEL {
			return Access{Level: auth.ReadWrite}
		}
	}
	return Access{Level: auth.ReadWrite, Producer: true}
}

// eachSchedule calls timer for every op of ops that schedules (a cancel
// carries no payload).
func eachSchedule(ops []*command.TimerOp, timer func(*command.TimerOp)) {
	for _, op := range ops {
		if op.Kind != command.TimerOp_CANCEL {
			timer(op)
		}
	}
}

// applyFireTimers fires the timers due by this entry's time, unless the
// operator switched fires off.
func applyFireTimers(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if c.meta.TimersFireDisabled {
		return &command.FireResult{}, true
	}
	return c.timers().Fire(cmd.GetFireTimers()), true
}

func applyDeleteMessage(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	res := c.q.DeleteMessage(cmd.GetDeleteMessage())
	return res, res.Deleted
}

// applyReplayDeadLetter moves a dead letter back into a partition: the new
// message and the record's removal are this one entry (a refused replay,
// duplicate or full, writes nothing).
func applyReplayDeadLetter(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	res := c.q.ReplayDeadLetter(cmd.GetReplayDeadLetter())
	return res, res.Verdict == command.ReplayResult_MOVED
}

func replayAudit(cmd *command.Command) (string, string) {
	r := cmd.GetReplayDeadLetter()
	to := "own partition"
	if r.Queue != "" {
		to = fmt.Sprintf("queue=%q partition=%q", r.Queue, r.Partition)
	}
	if len(r.RecordId) > 0 {
		return "dlq_replay", fmt.Sprintf("record=%x sourceQueue=%q to %s", r.RecordId, r.SourceQueue, to)
	}
	return "dlq_replay", fmt.Sprintf("partitionId=%x transactionId=%q group=%q sourceQueue=%q to %s",
		r.PartitionId, r.TransactionId, r.ConsumerGroup, r.SourceQueue, to)
}

func applyPurgeDeadLetters(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	res := c.q.PurgeDeadLetters(cmd.GetPurgeDeadLetters())
	return res, res.Purged > 0
}

func applyRecordTrace(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	res := c.q.RecordTrace(cmd.GetRecordTrace())
	return res, res.Found
}

// applyIdempotencyRecord has no effect but its result, the refusal, which
// applyCommand stores under the command's key as it stores every keyed
// command's outcome (package idempotency).
func applyIdempotencyRecord(_ *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if r := cmd.GetIdempotencyRecord().GetRefusal(); r != nil {
		return r, true
	}
	return &command.Refusal{}, true
}
