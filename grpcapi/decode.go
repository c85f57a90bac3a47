package grpcapi

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/request"
)

// Requests in: the wire decoding of queen.v1 into package request's input
// types. A protobuf message is already typed, so what is left here is what
// the wire says differently: unset vs zero, enums for the words the HTTP
// API spells, payloads as opaque bytes that must hold JSON. The rules are
// all package request's.

func pushItems(in []*queenpb.PushItem) ([]request.PushItem, error) {
	out := make([]request.PushItem, len(in))
	for i, it := range in {
		if it == nil {
			return nil, request.Bad("Each item must be an object")
		}
		payload, err := request.JSONValue("payload", it.Payload)
		if err != nil {
			return nil, err
		}
		out[i] = request.PushItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionId, Payload: payload}
		if it.TraceId != "" {
			out[i].TraceID = &it.TraceId
		}
	}
	return out, nil
}

// pop decodes a pop. One PopRequest covers the HTTP API's three pop routes,
// so naming no queue (and no namespace), or both, is a malformed request
// here, where the HTTP paths cannot say it.
func pop(in *queenpb.PopRequest) (request.Pop, error) {
	if in == nil {
		return request.Pop{}, request.Bad("pop must be set")
	}
	switch {
	case in.Queue == "" && in.Namespace == "":
		return request.Pop{}, request.Bad("queue (or namespace) is required")
	case in.Queue != "" && in.Namespace != "":
		return request.Pop{}, request.Bad("set queue or namespace, not both")
	}
	out := request.Pop{
		Queue: in.Queue, Namespace: in.Namespace, Task: in.Task, ConsumerGroup: in.ConsumerGroup,
		Batch: int64(in.Batch), Partitions: int64(in.Partitions), AutoAck: in.AutoAck, LeaseSeconds: in.LeaseSeconds,
		Wait: time.Duration(in.WaitMs) * time.Millisecond,
	}
	if in.Partition != "" && in.Queue != "" {
		out.Partition, out.HasPartition = in.Partition, true
	}
	out.Conflation = in.Conflation
	switch in.SubscriptionMode {
	case queenpb.SubscriptionMode_SUBSCRIPTION_MODE_NEW:
		out.SubscriptionMode = "new"
	case queenpb.SubscriptionMode_SUBSCRIPTION_MODE_ALL:
		out.SubscriptionMode = "all"
	}
	if in.SubscriptionFrom != nil {
		out.SubscriptionFrom = in.SubscriptionFrom.AsTime().UTC().Format(time.RFC3339Nano)
	}
	return out, nil
}

// ackStatuses are the HTTP API's words for the public statuses.
var ackStatuses = map[queenpb.AckStatus]string{
	queenpb.AckStatus_ACK_STATUS_COMPLETED: "completed", queenpb.AckStatus_ACK_STATUS_FAILED: "failed",
	queenpb.AckStatus_ACK_STATUS_RETRY: "retry", queenpb.AckStatus_ACK_STATUS_DLQ: "dlq",
}

// ackStatus is nil for UNSPECIFIED (completed), and a word no status has
// for a value this API does not know (refused as an invalid status).
func ackStatus(s queenpb.AckStatus) *string {
	if s == queenpb.AckStatus_ACK_STATUS_UNSPECIFIED {
		return nil
	}
	w := ackStatuses[s]
	return &w
}

func ack(in *queenpb.AckRequest) request.Ack {
	if in == nil {
		return request.Ack{}
	}
	return request.Ack{TransactionID: in.TransactionId, PartitionID: in.PartitionId, ConsumerGroup: in.ConsumerGroup,
		LeaseID: in.LeaseId, Status: ackStatus(in.Status), Error: in.Error}
}

func ackItems(in []*queenpb.AckItem) ([]request.Ack, error) {
	out := make([]request.Ack, len(in))
	for i, a := range in {
		if a == nil {
			return nil, request.Bad("Each acknowledgment must be an object")
		}
		out[i] = request.Ack{TransactionID: a.TransactionId, PartitionID: a.PartitionId, LeaseID: a.LeaseId,
			Status: ackStatus(a.Status), Error: a.Error}
	}
	return out, nil
}

func transaction(in *queenpb.TransactionRequest) (request.Txn, error) {
	out := request.Txn{RequiredLeases: in.RequiredLeases}
	for _, op := range in.Operations {
		switch o := op.GetOp().(type) {
		case *queenpb.TransactionOp_Ack:
			a := ack(o.Ack)
			out.Ops = append(out.Ops, request.TxnOp{Ack: &a})
		case *queenpb.TransactionOp_Push:
			items, err := pushItems([]*queenpb.PushItem{o.Push})
			if err != nil {
				return out, err
			}
			out.Ops = append(out.Ops, request.TxnOp{Push: items})
		default:
			return out, request.Bad("Each operation must be an ack or a push")
		}
	}
	var err error
	if out.KV, err = kvOps(in.Kv); err != nil {
		return out, err
	}
	out.Timers = timerOps(in.Timers)
	for _, p := range in.Positions {
		meta, err := request.JSONValue("metadata", p.Metadata)
		if err != nil {
			return out, err
		}
		if len(p.Metadata) == 0 {
			meta = nil
		}
		out.Positions = append(out.Positions, request.Position{Queue: p.Queue, ConsumerGroup: p.ConsumerGroup,
			Partition: p.Partition, HasPartition: p.Partition != "", Offset: p.Offset, Forget: p.Forget, Metadata: meta,
			SubscriptionMode: p.SubscriptionMode, SubscriptionFrom: p.SubscriptionFrom})
	}
	return out, nil
}

var kvOpNames = map[queenpb.KvOpKind]string{
	queenpb.KvOpKind_KV_OP_KIND_GET: "get", queenpb.KvOpKind_KV_OP_KIND_GET_MANY: "getMany",
	queenpb.KvOpKind_KV_OP_KIND_GET_PREFIX: "getPrefix", queenpb.KvOpKind_KV_OP_KIND_PUT: "put",
	queenpb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT: "putIfAbsent", queenpb.KvOpKind_KV_OP_KIND_CAS: "cas",
	queenpb.KvOpKind_KV_OP_KIND_DELETE: "delete", queenpb.KvOpKind_KV_OP_KIND_INCR: "incr",
	queenpb.KvOpKind_KV_OP_KIND_CHECK: "check",
}

func kvOps(in []*queenpb.KvOp) ([]request.KVOp, error) {
	out := make([]request.KVOp, len(in))
	for i, op := range in {
		if op == nil {
			return nil, request.KVBad("kv_bad_op", request.OpAt(i)+"must be an object")
		}
		o := request.KVOp{
			Op: kvOpNames[op.Op], Ns: op.Ns, Key: op.Key, Keys: op.Keys, Prefix: op.Prefix, After: op.After,
			Limit: int64(op.Limit), KeysOnly: op.KeysOnly, HasValue: op.Value != nil, TTL: op.TtlSeconds,
			HasTTL: op.TtlSeconds != 0, Forever: op.Forever, Required: op.Required,
		}
		if o.Op == "" {
			o.Op = op.Op.String()
		}
		if o.HasValue {
			v, err := request.JSONValue(request.OpAt(i)+"value", op.Value)
			if err != nil {
				return nil, request.KVBad("kv_bad_value", err.Error())
			}
			o.Value = v
		}
		if op.Expect != nil {
			o.Expect, o.HasExpect = int64(min(*op.Expect, 1<<63-1)), true
			if *op.Expect > 1<<63-1 {
				o.Expect = -1 // over any version: refused as a bad expect
			}
		}
		if op.Delta != nil {
			o.Delta, o.HasDelta = *op.Delta, true
		}
		if op.Min != nil {
			o.Min, o.HasMin = *op.Min, true
		}
		if op.Max != nil {
			o.Max, o.HasMax = *op.Max, true
		}
		out[i] = o
	}
	return out, nil
}

var timerOpNames = map[queenpb.TimerOpKind]string{
	queenpb.TimerOpKind_TIMER_OP_KIND_SCHEDULE: "schedule", queenpb.TimerOpKind_TIMER_OP_KIND_RESCHEDULE: "reschedule",
	queenpb.TimerOpKind_TIMER_OP_KIND_CANCEL: "cancel",
}

func timerOps(in []*queenpb.TimerOp) []request.TimerOp {
	out := make([]request.TimerOp, len(in))
	for i, op := range in {
		if op == nil {
			continue // an op with no kind: refused as a bad op
		}
		out[i] = request.TimerOp{
			Op: timerOpNames[op.Op], Queue: op.Queue, TimerKey: op.TimerKey, HasPartition: op.Partition != nil,
			Partition: op.GetPartition(), HasDelay: op.DelayMs != nil, DelayMs: op.GetDelayMs(), Txn: op.Txn,
			Payload: op.Payload, PayloadZstd: op.PayloadZstd, Encrypted: op.Encrypted,
		}
	}
	return out
}

// sameFields copies src into dst, two messages with the same fields under
// the same numbers (the public and the stored queue options:
// TestQueueOptionsMatch), through their wire bytes.
func sameFields[T proto.Message](src proto.Message, dst T) T {
	if b, err := proto.Marshal(src); err == nil {
		_ = proto.Unmarshal(b, dst)
	}
	return dst
}

func configure(in *queenpb.ConfigureRequest) (request.Configure, error) {
	return request.Configure{Queue: in.Queue, Namespace: in.Namespace, Task: in.Task,
		Options: sameFields(in.Options, &command.QueueOptions{})}, nil
}
