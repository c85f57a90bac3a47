package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/streams"
)

// Streams (spec §4.16): the handlers of the three commands, and the cycle,
// which spans three domains (streams' state, the sink's pushes, the
// source's ack) in one change, as a transaction does.

func applyStreamRegister(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	res := streams.Register(c.tx, cmd.GetStreamRegister(), c.now)
	return res, !res.Mismatch
}

// applyStreamDeleteQuery deletes a query; one that is not there keeps
// nothing, so it leaves no audit record either.
func applyStreamDeleteQuery(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	deleted := streams.Delete(c.tx, cmd.GetStreamDeleteQuery().Name)
	return &command.StreamDeleteQueryResult{Deleted: deleted}, deleted
}

// streamRegisterRefusal answers a changed hash without reset (409) without
// an entry.
func streamRegisterRefusal(rd *Reader, cmd *command.Command) proto.Message {
	in := cmd.GetStreamRegister()
	if q := streams.QueryByName(rd.r, in.Name); q != nil && q.ConfigHash != in.ConfigHash && !in.ResetState {
		return &command.StreamRegisterResult{Query: q, Mismatch: true}
	}
	return nil
}

// streamDeleteRefusal answers the deletion of a query that is not there
// without an entry.
func streamDeleteRefusal(rd *Reader, cmd *command.Command) proto.Message {
	if streams.QueryByName(rd.r, cmd.GetStreamDeleteQuery().Name) == nil {
		return &command.StreamDeleteQueryResult{}
	}
	return nil
}

// applyStreamCycle commits a cycle whole or not at all: the ack first
// (judged against the state before the cycle), then the state operations,
// then the pushes; the first refusal rolls everything back and is the
// answer (HTTP 200 success:false). An ack whose messages its lease already
// consumed is a retry of a cycle that committed: answered as a success,
// applied again never.
func applyStreamCycle(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetStreamCycle()
	fail := func(f command.StreamCycleResult_Failure, text string) (proto.Message, bool) {
		return &command.StreamCycleResult{Failure: f, Error: text}, false
	}
	q := streams.Query(c.tx, in.QueryId)
	if q == nil {
		return fail(command.StreamCycleResult_QUERY_NOT_FOUND, "query not found")
	}
	if q.SourceQueue != in.SourceQueue || q.SinkQueue != in.SinkQueue {
		return fail(command.StreamCycleResult_QUERY_CHANGED, "the query's queues changed since the cycle was checked: retry")
	}
	if sq := c.q.PartitionQueueOf(in.PartitionId); sq != "" && sq != q.SourceQueue {
		return fail(command.StreamCycleResult_QUERY_CHANGED, "partition_id is a partition of queue "+sq+", not of the query's source "+q.SourceQueue)
	}
	res := &command.StreamCycleResult{Success: true}
	if a := in.Ack; a != nil {
		r := c.q.AckRun(queue.RunAck{PartitionID: in.PartitionId, Group: in.ConsumerGroup, TransactionID: a.TransactionId,
			LeaseID: a.LeaseId, Status: a.Status, Release: in.ReleaseLease})
		if !r.OK {
			return fail(command.StreamCycleResult_ACK_REFUSED, r.Error)
		}
		if r.Replayed {
			return &command.StreamCycleResult{Success: true, Replayed: true, Acked: true}, false
		}
		res.Acked, res.LeaseReleased, res.Dlq, res.AckCount = true, r.LeaseReleased, r.Dlq, max(a.Count, r.Acked)
	} else if c.q.LeaseHeld(in.PartitionId, in.ConsumerGroup) {
		return fail(command.StreamCycleResult_PARTITION_LEASED,
			"a cycle without an ack cannot commit while a lease of the consumer group holds the partition: retry after it")
	}
	st := streams.Open(c.tx, q, in.PartitionId, in.MaxKeys)
	for _, op := range in.Ops {
		switch op.Type {
		case command.StreamStateOp_UPSERT:
			if !st.Upsert(op.Key, op.Value, c.now) {
				return fail(command.StreamCycleResult_TOO_MANY_KEYS, "the query would hold more keys in this partition than the limit allows")
			}
		case command.StreamStateOp_DELETE:
			if !st.Remove(op.Key) && in.Ack == nil {
				return fail(command.StreamCycleResult_STATE_CHANGED, "state changed since it was read: "+op.Key+" is already deleted (another flush emitted it)")
			}
		}
		res.StateOpsApplied++
	}
	st.Close()
	for _, it := range in.Pushes {
		r := c.q.Push(it)
		if r.Status == command.PushItemResult_FAILED {
			return fail(command.StreamCycleResult_PUSH_FAILED, "push to "+it.Queue+" failed: "+r.Error)
		}
		res.Pushes = append(res.Pushes, r)
	}
	return res, true
}

// streamCycleTouches: the query's queues as the front end read them, the
// source partition, and every push's queue.
func streamCycleTouches(cmd *command.Command, touch func(Touch)) {
	in := cmd.GetStreamCycle()
	touch(Queue(in.SourceQueue))
	if in.SinkQueue != "" {
		touch(Queue(in.SinkQueue))
	}
	touch(Partition(in.PartitionId))
	for _, it := range in.Pushes {
		touch(Queue(it.Queue))
	}
}

func streamCyclePayloads(cmd *command.Command, push func(*command.PushItem), _ func(*command.TimerOp)) {
	for _, it := range cmd.GetStreamCycle().Pushes {
		push(it)
	}
}
