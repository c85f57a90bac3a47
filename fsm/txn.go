package fsm

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/producers"
	"github.com/queen-node/queen-node/timers"
)

// applyTransaction applies acks, pushes, KV operations, timers and
// positions as one change. Checks run in that order, and the first refusal
// decides the reason; a refusal discards every write of the entry
// (invariant 3).
func applyTransaction(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetTransaction()
	res := &command.TxnResult{TransactionId: in.TransactionId}
	results := make([]*command.TxnItemResult, len(in.Ops), len(in.Ops)+len(in.Kv)+len(in.Timers))
	refuse := func(reason command.Reason, text string) (proto.Message, bool) {
		return &command.TxnResult{TransactionId: in.TransactionId, Reason: reason, Error: text, FailedIndex: -1}, false
	}

	if off := transactionSwitchedOff(c.meta, cmd); off != nil {
		return off, false
	}
	if g := in.Kafka; g != nil { // a Kafka producer's commit: only under its current epoch
		if g.CoordinatorTerm != 0 && g.CoordinatorTerm != c.term {
			return refuse(command.Reason_COORDINATOR_MOVED, "the transaction was staged by the leader of term "+strconv.FormatUint(g.CoordinatorTerm, 10)+
				", and this entry is of term "+strconv.FormatUint(c.term, 10)+": its offsets were not pending where consumers fetched them since; abort it and retry")
		}
		if code := producers.Current(c.tx, g.ProducerId, g.ProducerEpoch); code != 0 {
			return refuse(command.Reason_PRODUCER_FENCED, "producer "+strconv.FormatInt(g.ProducerId, 10)+" epoch "+strconv.Itoa(int(g.ProducerEpoch))+" is not current: a newer InitProducerId fenced it, or it expired")
		}
		producers.Touch(c.tx, g.ProducerId, c.now, g.ProducerIdleUs)
	}
	if at := timers.Conflict(in.Timers, c.q.Encrypts); at >= 0 {
		return refuse(command.Reason_BAD_REQUEST, "timer "+strconv.Itoa(at)+" ("+in.Timers[at].Queue+"): encrypted is set, but the queue encrypts at rest and owns that flag")
	}

	// 1. Acks, judged together against the state before the transaction.
	var ackItems []*command.AckItem
	var ackAt []int
	for i, op := range in.Ops {
		if a := op.GetAck(); a != nil {
			ackItems = append(ackItems, a)
			ackAt = append(ackAt, i)
		}
	}
	if len(ackItems) > 0 {
		for j, r := range c.q.Acks(ackItems, true, in.RequiredLeases) {
			if !r.Success {
				text := "ACK operation failed: " + r.Error
				if !r.NotFound {
					text += " (" + r.TransactionId + ")"
				}
				// failedIndex names the refused ack (its index in operations),
				// so that a client settling a batch can tell which lease it lost.
				return &command.TxnResult{TransactionId: in.TransactionId, Reason: command.Reason_REJECTED_ACK, Error: text,
					FailedIndex: int32(ackAt[j])}, false
			}
			results[ackAt[j]] = &command.TxnItemResult{
				Type: command.TxnItemResult_ACK, Success: true, TransactionId: r.TransactionId, Dlq: r.Dlq, LeaseReleased: r.LeaseReleased,
			}
		}
	}

	// 2. Pushes. A transactionId already stored in its partition aborts the
	// whole transaction; one repeated inside this transaction is stored once
	// (addendum §4.6).
	pushed := map[string]bool{}
	for i, op := range in.Ops {
		p := op.GetPush()
		if p == nil {
			continue
		}
		r := c.q.Push(p)
		key := string(r.PartitionId) + p.TransactionId
		if r.Status == command.PushItemResult_DUPLICATE && !pushed[key] {
			return refuse(command.Reason_DUPLICATE, "duplicate transactionId "+p.TransactionId+" in queue "+p.Queue)
		}
		pushed[key] = true
		results[i] = &command.TxnItemResult{
			Type: command.TxnItemResult_PUSH, Success: true, TransactionId: p.TransactionId, MessageId: r.MessageId,
			PartitionId: r.PartitionId, Queue: p.Queue, Offset: r.Offset,
		}
	}

	// 3. KV, with required gates.
	if len(in.Kv) > 0 {
		kvres, failed := c.kvOps(in.Kv)
		if failed >= 0 {
			f := kvres[failed]
			return &command.TxnResult{
				TransactionId: in.TransactionId, Reason: command.Reason_KV_PRECONDITION,
				Error:       "kv precondition failed at index " + strconv.Itoa(len(in.Ops)+failed) + ": " + f.Reason.Text(),
				FailedIndex: int32(len(in.Ops) + failed), FailedKv: f,
			}, false
		}
		for i, r := range kvres {
			results = append(results, &command.TxnItemResult{Type: command.TxnItemResult_KV, Success: true, Kv: r, OpIndex: uint32(i)})
		}
	}

	// 4. Timers: no precondition can refuse them (absent is a value); they
	// share the transaction's fate.
	if len(in.Timers) > 0 {
		t := c.timers()
		for i, op := range in.Timers {
			results = append(results, &command.TxnItemResult{Type: command.TxnItemResult_TIMER, Success: true, Timer: t.Op(i, op)})
		}
	}
	// 5. Positions: a queue that does not exist rolls everything back.
	for i, p := range in.Positions {
		ok, kindConflict := c.q.SetPosition(p)
		switch {
		case !ok:
			return refuse(command.Reason_QUEUE_NOT_FOUND, "positions["+strconv.Itoa(i)+"]: queue "+p.Queue+" does not exist")
		case kindConflict && p.KafkaGroup:
			return refuse(command.Reason_GROUP_KIND, "consumer group "+p.ConsumerGroup+" of queue "+p.Queue+" is a Queen consumer group: a Kafka client cannot commit its offsets")
		case kindConflict:
			return refuse(command.Reason_GROUP_KIND, "positions["+strconv.Itoa(i)+"]: consumer group "+p.ConsumerGroup+" of queue "+p.Queue+" is a Kafka consumer group: its offsets are committed by Kafka clients")
		}
		results = append(results, &command.TxnItemResult{Type: command.TxnItemResult_POSITION, Success: true, OpIndex: uint32(i)})
	}
	res.Success = true
	res.Results = results
	res.FailedIndex = -1
	return res, true
}

// transactionTouches names what a transaction touches, every rider
// included: the queue of each push, the partition of each ack, the
// namespace of each KV op (a lock's guard is one), the queue of each timer
// and of each position.
func transactionTouches(cmd *command.Command, touch func(Touch)) {
	in := cmd.GetTransaction()
	for _, op := range in.Ops {
		if p := op.GetPush(); p != nil {
			touch(Queue(p.Queue))
		}
		if a := op.GetAck(); a != nil {
			touch(Partition(a.PartitionId))
		}
	}
	for _, op := range in.Kv {
		touch(Namespace(op.Ns))
	}
	for _, op := range in.Timers {
		touch(Queue(op.Queue))
	}
	for _, p := range in.Positions {
		touch(Queue(p.Queue))
	}
}

// transactionPayloads visits a transaction's pushes and the timers it
// schedules (the messages they will append).
func transactionPayloads(cmd *command.Command, push func(*command.PushItem), timer func(*command.TimerOp)) {
	in := cmd.GetTransaction()
	for _, op := range in.Ops {
		if p := op.GetPush(); p != nil {
			push(p)
		}
	}
	eachSchedule(in.Timers, timer)
}

func transactionRefusal(rd *Reader, cmd *command.Command) proto.Message {
	return transactionSwitchedOff(rd.Meta(), cmd)
}
