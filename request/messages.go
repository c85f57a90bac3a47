package request

import (
	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
)

// The message routes (spec §4.9), dead-letter replay and purge, and
// traces (spec §4.15).

// Limits of the message and trace views [ours].
const (
	DefaultMessageList  = 200
	MaxMessageList      = 1000
	DefaultMessageRange = 3600 * 1e6 // µs: the list shows the last hour unless from is given (Queen's default)
	DefaultTraceList    = 100
	DefaultTraceNames   = 50
	MaxTraceList        = 1000
	MaxTraceData        = 64 << 10
	MaxTraceNames       = 32
	MaxPurgePerEntry    = 10000
)

// MessageQuery is GET /api/v1/messages as decoded: absent values are "".
type MessageQuery struct {
	Queue, Partition, Namespace, Task, Status, From, To string
	Limit, Offset                                       int64 // as the front end parsed them (defaults applied)
}

// ListMessages validates the list's filters; now is the node's time (the
// default range ends there).
func ListMessages(in MessageQuery, now int64) (queue.MessageFilter, error) {
	f := queue.MessageFilter{Queue: in.Queue, Partition: in.Partition, Namespace: in.Namespace, Task: in.Task,
		Status: in.Status, Limit: int(in.Limit), Offset: int(in.Offset)}
	switch in.Status {
	case "", queue.StatusPending, queue.StatusProcessing, queue.StatusCompleted, queue.StatusDeadLetter:
	default:
		return f, Bad("status must be one of pending, processing, completed, dead_letter")
	}
	for _, n := range []struct{ what, v string }{{"queue", in.Queue}, {"partition", in.Partition}, {"ns", in.Namespace}, {"task", in.Task}} {
		if err := CheckName(n.what, n.v); err != nil {
			return f, err
		}
	}
	f.ToUs = now
	if in.To != "" {
		us, ok := ParseTime(in.To)
		if !ok {
			return f, Bad("to must be an ISO-8601 time, e.g. 2026-01-02T15:04:05.000Z")
		}
		f.ToUs = us
	}
	f.FromUs = f.ToUs - DefaultMessageRange
	if in.From != "" {
		us, ok := ParseTime(in.From)
		if !ok {
			return f, Bad("from must be an ISO-8601 time, e.g. 2026-01-02T15:04:05.000Z")
		}
		f.FromUs = us
	}
	if f.FromUs > f.ToUs {
		return f, Bad("from must not be after to")
	}
	if f.Limit <= 0 {
		f.Limit = DefaultMessageList
	}
	f.Limit = min(f.Limit, MaxMessageList)
	f.Offset = max(f.Offset, 0)
	return f, nil
}

// MessageRef validates the (partitionId, transactionId) of a message route.
func MessageRef(partitionID, transactionID string) ([]byte, error) {
	pid, err := uuid.Parse(partitionID)
	if err != nil || len(partitionID) != 36 {
		return nil, Bad("partitionId must be a UUID")
	}
	if transactionID == "" {
		return nil, Bad("transactionId is required")
	}
	if len(transactionID) > MaxTxnIDBytes {
		return nil, Bad("transactionId is too long")
	}
	return pid[:], nil
}

// MessageNotFound is the answer of a message route whose message does not
// exist (spec §4.9).
func MessageNotFound() *Error { return &Error{Kind: NotFound, Msg: "Message not found"} }

// DeleteMessage is the entry of DELETE /api/v1/messages/:p/:t, for the
// message seq the front end found (queue.Reader.FindMessage).
func DeleteMessage(pid []byte, seq uint64, txn string) *command.Command {
	return &command.Command{Body: &command.Command_DeleteMessage{DeleteMessage: &command.DeleteMessage{
		PartitionId: pid, Seq: seq, TransactionId: txn}}}
}

// Destination is the optional destination of a replay: another queue (and
// partition) than the dead letter's own.
type Destination struct {
	Queue, Partition string
}

func (d Destination) check() error {
	if d.Queue == "" && d.Partition != "" {
		return Bad("partition needs queue: a replay to another partition names its queue too")
	}
	if err := CheckName("queue", d.Queue); err != nil {
		return err
	}
	return CheckName("partition", d.Partition)
}

// DeadLetterID reads the id of POST /api/v1/dlq/:id/replay.
func DeadLetterID(id string) ([]byte, error) {
	b, ok := queue.ParseDeadLetterID(id)
	if !ok {
		return nil, Bad("invalid dead letter id: expected the 40 hex digits of a dead letter's dlqId")
	}
	return b, nil
}

// ReplayByID is the entry of POST /api/v1/dlq/:id/replay, and of POST
// /api/v1/messages/:p/:t/retry once the front end found that message's
// dead letter (queue.Reader.DeadLetterOf); sourceQueue is the record's
// queue as the front end read it.
func ReplayByID(id []byte, sourceQueue string, to Destination) (*command.Command, error) {
	if err := to.check(); err != nil {
		return nil, err
	}
	return &command.Command{Body: &command.Command_ReplayDeadLetter{ReplayDeadLetter: &command.ReplayDeadLetter{
		RecordId: id, SourceQueue: sourceQueue, Queue: to.Queue, Partition: to.Partition, MessageId: NewMessageID()}}}, nil
}

// DeadLetterGone is the answer of a replay whose record is not there (a
// second call, or one purged or expired).
func DeadLetterGone() *Error {
	return &Error{Kind: NotFound, Msg: "Dead letter not found (replayed, purged or expired)", Code: "gone"}
}

// ReplayVerdict is the error a replay's result is answered with, or nil
// (moved, duplicate and full are answered 200 with their verdict).
func ReplayVerdict(res *command.ReplayResult) *Error {
	if res.Verdict == command.ReplayResult_GONE {
		return DeadLetterGone()
	}
	return nil
}

// Text is the verdict as clients read it.
func VerdictText(v command.ReplayResult_Verdict) string {
	switch v {
	case command.ReplayResult_MOVED:
		return "moved"
	case command.ReplayResult_DUPLICATE:
		return "duplicate"
	case command.ReplayResult_FULL:
		return "full"
	}
	return "gone"
}

// PurgeDLQ is one entry of DELETE /api/v1/dlq?queue=&consumerGroup=: a
// purge names one queue, never all of them.
func PurgeDLQ(queue, group string) (*command.Command, error) {
	if queue == "" {
		return nil, Bad("queue is required: a purge removes the dead letters of one queue")
	}
	if err := CheckName("queue", queue); err != nil {
		return nil, err
	}
	if err := CheckName("consumerGroup", group); err != nil {
		return nil, err
	}
	return &command.Command{Body: &command.Command_PurgeDeadLetters{PurgeDeadLetters: &command.PurgeDeadLetters{
		Queue: queue, ConsumerGroup: group, Limit: MaxPurgePerEntry}}}, nil
}

// Trace is POST /api/v1/traces as decoded (spec §4.15): nil = absent.
type Trace struct {
	TransactionID, PartitionID *string
	ConsumerGroup              string
	TraceNames                 []string // the array, or the one string, or none
	EventType                  string
	Data                       []byte // JSON text; nil = absent
	WorkerID                   string
}

// TraceRef validates a trace's message reference (spec §4.15 texts).
func TraceRef(in Trace) ([]byte, error) {
	if in.TransactionID == nil || in.PartitionID == nil || *in.TransactionID == "" || *in.PartitionID == "" {
		return nil, Bad("transactionId and partitionId are required")
	}
	return MessageRef(*in.PartitionID, *in.TransactionID)
}

// RecordTrace is the entry of POST /api/v1/traces for the message seq the
// front end found; it checks the rest of the body.
func RecordTrace(in Trace, pid []byte, seq uint64) (*command.Command, error) {
	if in.Data == nil {
		return nil, Bad("data is required")
	}
	if len(in.Data) > MaxTraceData {
		return nil, &Error{Kind: TooLarge, Msg: "data is too large (max 65536 bytes)"}
	}
	if len(in.TraceNames) > MaxTraceNames {
		return nil, Bad("traceNames: at most 32 names")
	}
	for _, n := range in.TraceNames {
		if n == "" {
			return nil, Bad("traceNames must be non-empty strings")
		}
		if err := CheckName("trace name", n); err != nil {
			return nil, err
		}
	}
	if err := CheckName("consumerGroup", in.ConsumerGroup); err != nil {
		return nil, err
	}
	if err := CheckName("eventType", in.EventType); err != nil {
		return nil, err
	}
	event := in.EventType
	if event == "" {
		event = "info"
	}
	id := uuid.New()
	return &command.Command{Body: &command.Command_RecordTrace{RecordTrace: &command.RecordTrace{
		PartitionId: pid, Seq: seq, TransactionId: *in.TransactionID, ConsumerGroup: in.ConsumerGroup,
		TraceNames: in.TraceNames, EventType: event, Data: in.Data, TraceId: id[:], WorkerId: in.WorkerID}}}, nil
}

// TraceName validates GET /api/v1/traces/by-name/:name.
func TraceName(name string) error {
	if name == "" {
		return Bad("trace name is required")
	}
	return CheckName("trace name", name)
}

// Page bounds a list's limit and offset: limit <= 0 takes def.
func Page(limit, offset int64, def int) (int, int) {
	l := int(limit)
	if l <= 0 {
		l = def
	}
	return min(l, MaxTraceList), int(max(offset, 0))
}
