package grpcapi

import (
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/request"
)

// Results out: the one place where the state machine's results become the
// public API's messages, so that the log's vocabulary never shows in queen.v1.

func uuidStr(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	return uuid.UUID(b).String()
}

// stamp turns µs since the epoch into a timestamp; 0 is unset.
func stamp(us int64) *timestamppb.Timestamp {
	if us == 0 {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: us / 1e6, Nanos: int32(us%1e6) * 1e3}
}

// jsonOrNil is a stored JSON text: nil when there is none, "null" when
// the stored value is empty.
func jsonOrNil(has bool, v []byte) []byte {
	if !has {
		return nil
	}
	if len(v) == 0 {
		return []byte("null")
	}
	return v
}

var pushStatuses = map[command.PushItemResult_Status]queenpb.PushStatus{
	command.PushItemResult_QUEUED:    queenpb.PushStatus_PUSH_STATUS_QUEUED,
	command.PushItemResult_DUPLICATE: queenpb.PushStatus_PUSH_STATUS_DUPLICATE,
	command.PushItemResult_BUFFERED:  queenpb.PushStatus_PUSH_STATUS_BUFFERED,
	command.PushItemResult_FAILED:    queenpb.PushStatus_PUSH_STATUS_FAILED,
}

func pushOut(r *command.PushResult) *queenpb.PushResponse {
	out := &queenpb.PushResponse{Results: make([]*queenpb.PushResult, len(r.Items))}
	for i, it := range r.Items {
		out.Results[i] = &queenpb.PushResult{
			Status: pushStatuses[it.Status], TransactionId: it.TransactionId, MessageId: uuidStr(it.MessageId),
			PartitionId: uuidStr(it.PartitionId), Queue: it.Queue, Offset: it.Offset, TraceId: it.TraceId, Error: it.Error,
		}
	}
	return out
}

// popOut shapes a pop's claimed messages with their stored records.
func popOut(r *command.PopResult) *queenpb.PopResponse {
	out := &queenpb.PopResponse{
		Queue: r.Queue, ConsumerGroup: r.ConsumerGroup, LeaseId: r.LeaseId,
		PartitionsClaimed: r.PartitionsClaimed, LeaseExpiresAt: stamp(r.LeaseExpiresUs),
		Messages: make([]*queenpb.Message, len(r.Messages)), ConflationConflict: r.ConflationConflict,
	}
	if r.ConflationEcho {
		out.Conflation = &r.Conflation
	}
	for i, m := range r.Messages {
		rec := &command.MessageRecord{}
		if i < len(r.Records) && r.Records[i] != nil {
			rec = r.Records[i]
		}
		payload := rec.Payload
		if len(payload) == 0 {
			payload = []byte("null")
		}
		out.Messages[i] = &queenpb.Message{
			Id: uuidStr(rec.Id), TransactionId: rec.TransactionId, TraceId: rec.TraceId, Payload: payload,
			ProducerSub: rec.ProducerSub, CreatedAt: stamp(rec.CreatedUs), Queue: m.Queue, Partition: m.Partition,
			PartitionId: uuidStr(m.PartitionId), LeaseId: r.LeaseId, ConsumerGroup: r.ConsumerGroup, RetryCount: m.RetryCount,
		}
	}
	return out
}

func ackOut(r *command.AckItemResult) *queenpb.AckResult {
	return &queenpb.AckResult{
		TransactionId: r.TransactionId, Success: r.Success, Error: r.Error, Queue: r.Queue,
		Partition: r.Partition, LeaseReleased: r.LeaseReleased, Dlq: r.Dlq, Noop: r.Noop,
	}
}

func txnOut(r *command.TxnResult) *queenpb.TransactionResponse {
	out := &queenpb.TransactionResponse{
		Success: r.Success, TransactionId: uuidStr(r.TransactionId), Reason: r.Reason.Text(), Error: r.Error,
		FailedIndex: r.FailedIndex,
	}
	if !r.Success {
		if r.FailedKv != nil {
			out.FailedKv = kvResultOut(r.FailedKv)
		}
		return out
	}
	out.Results = make([]*queenpb.TransactionItemResult, len(r.Results))
	for i, it := range r.Results {
		x := &queenpb.TransactionItemResult{
			Type: it.Type.Text(), Success: it.Success, TransactionId: it.TransactionId, Dlq: it.Dlq,
			LeaseReleased: it.LeaseReleased, MessageId: uuidStr(it.MessageId), PartitionId: uuidStr(it.PartitionId),
			Queue: it.Queue, Offset: it.Offset, OpIndex: it.OpIndex,
		}
		if it.Kv != nil {
			x.Kv = kvResultOut(it.Kv)
		}
		if it.Timer != nil {
			x.Timer = timerResultOut(it.Timer)
		}
		out.Results[i] = x
	}
	return out
}

func kvRowOut(r *command.KVRow) *queenpb.KvRow {
	return &queenpb.KvRow{Key: r.Key, Value: jsonOrNil(r.Value != nil, r.Value), Version: r.Version,
		ExpiresAt: stamp(r.ExpiresUs), UpdatedAt: stamp(r.UpdatedUs)}
}

func kvResultOut(r *command.KVResult) *queenpb.KvResult {
	out := &queenpb.KvResult{
		Op: request.KVOpName(r.Kind), Key: r.Key, Found: r.Found, Applied: r.Applied, Version: r.Version,
		Reason: r.Reason.Text(), Missing: r.Missing, Truncated: r.Truncated, NextAfter: r.NextAfter,
		ExpiresAt: stamp(r.ExpiresUs), UpdatedAt: stamp(r.UpdatedUs),
	}
	switch r.Kind {
	case command.KVOp_GET:
		out.Value = jsonOrNil(r.Found, r.Value)
	default:
		out.Value = jsonOrNil(r.HasValue, r.Value)
	}
	for _, row := range r.Rows {
		out.Rows = append(out.Rows, kvRowOut(row))
	}
	return out
}

func kvBatchOut(r *command.KVBatchResult) *queenpb.KvResponse {
	out := &queenpb.KvResponse{Ok: r.Ok, Reason: r.Reason.Text(), FailedIndex: r.FailedIndex}
	if !r.Ok {
		if r.FailedIndex >= 0 && int(r.FailedIndex) < len(r.Results) {
			out.Failed = kvResultOut(r.Results[r.FailedIndex])
		}
		return out
	}
	out.Results = make([]*queenpb.KvResult, len(r.Results))
	for i, x := range r.Results {
		out.Results[i] = kvResultOut(x)
	}
	return out
}

func configureOut(r *command.ConfigureResult) *queenpb.ConfigureResponse {
	return &queenpb.ConfigureResponse{
		QueueId: uuidStr(r.QueueId), PartitionId: uuidStr(r.PartitionId), Queue: r.Queue,
		Namespace: r.Namespace, Task: r.Task, Options: sameFields(r.Options, &queenpb.QueueOptions{}),
	}
}
