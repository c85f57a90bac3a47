package request

import (
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/streams"
)

// StreamLimits bound a stream cycle (spec §4.16 leaves them to the
// broker): refused with 400 before any entry. Zero means the default.
type StreamLimits struct {
	MaxOps, MaxPushes, MaxValueBytes, MaxKeys int
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.MaxOps <= 0 {
		l.MaxOps = streams.DefaultMaxOps
	}
	if l.MaxPushes <= 0 {
		l.MaxPushes = streams.DefaultMaxPushes
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = streams.DefaultMaxValueBytes
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = streams.DefaultMaxKeys
	}
	return l
}

// StreamRegister is POST /streams/v1/queries as a front end decoded it.
type StreamRegister struct {
	Name, SourceQueue, SinkQueue, ConfigHash string
	Reset                                    bool
}

// StreamRegisterCommand checks a registration and mints the ids a new
// query (or a reset's new state generation) takes.
func StreamRegisterCommand(in StreamRegister) (*command.Command, error) {
	for _, f := range []struct{ name, v string }{{"name", in.Name}, {"source_queue", in.SourceQueue}, {"config_hash", in.ConfigHash}} {
		if f.v == "" {
			return nil, Bad(f.name + " is required")
		}
	}
	if len(in.Name) > MaxNameBytes || !utf8.ValidString(in.Name) {
		return nil, Bad(fmt.Sprintf("name must be valid UTF-8 of at most %d bytes", MaxNameBytes))
	}
	if len(in.ConfigHash) > 256 {
		return nil, Bad("config_hash is too long (at most 256 bytes)")
	}
	if err := CheckName("source_queue", in.SourceQueue); err != nil {
		return nil, err
	}
	if err := CheckName("sink_queue", in.SinkQueue); err != nil {
		return nil, err
	}
	qid, sid := uuid.New(), uuid.New()
	return &command.Command{Body: &command.Command_StreamRegister{StreamRegister: &command.StreamRegister{
		Name: in.Name, SourceQueue: in.SourceQueue, SinkQueue: in.SinkQueue, ConfigHash: in.ConfigHash,
		ResetState: in.Reset, QueryId: qid[:], StateId: sid[:]}}}, nil
}

// StreamOp is one state operation of a cycle as decoded.
type StreamOp struct {
	Type, Key string
	Value     []byte // JSON text; nil = not sent
}

// StreamAck is a cycle's ack as decoded.
type StreamAck struct {
	TransactionID, LeaseID, Status string
	Count                          int64
}

// StreamCycle is POST /streams/v1/cycle as decoded.
type StreamCycle struct {
	QueryID, PartitionID, ConsumerGroup string
	Ops                                 []StreamOp
	Pushes                              []PushItem
	Ack                                 *StreamAck // nil: ack null (a flush)
	ReleaseLease                        bool
}

// StreamID reads a query or partition id: a UUID.
func StreamID(field, s string) ([]byte, error) {
	if s == "" {
		return nil, Bad(field + " is required")
	}
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return nil, Bad(field + " must be a UUID")
	}
	return id[:], nil
}

// streamIDs reads the query_id and partition_id every stream call names.
func streamIDs(query, partition string) (qid, pid []byte, err error) {
	if qid, err = StreamID("query_id", query); err != nil {
		return nil, nil, err
	}
	pid, err = StreamID("partition_id", partition)
	return qid, pid, err
}

var streamAckStatus = map[string]command.AckStatus{
	"": command.AckStatus_COMPLETED, "completed": command.AckStatus_COMPLETED, "success": command.AckStatus_COMPLETED,
	"failed": command.AckStatus_FAILED, "dlq": command.AckStatus_DLQ,
}

// StreamCycle checks a cycle against the limits and builds its command,
// without the query's queues (the front end reads them and sets them).
func (l StreamLimits) StreamCycle(in StreamCycle) (*command.StreamCycle, error) {
	l = l.withDefaults()
	qid, pid, err := streamIDs(in.QueryID, in.PartitionID)
	if err != nil {
		return nil, err
	}
	if err := CheckName("consumer_group", in.ConsumerGroup); err != nil {
		return nil, err
	}
	if len(in.Ops) > l.MaxOps {
		return nil, Bad(fmt.Sprintf("%d state_ops in one cycle; at most %d", len(in.Ops), l.MaxOps))
	}
	if len(in.Pushes) > l.MaxPushes {
		return nil, Bad(fmt.Sprintf("%d push_items in one cycle; at most %d", len(in.Pushes), l.MaxPushes))
	}
	out := &command.StreamCycle{QueryId: qid, PartitionId: pid, ConsumerGroup: in.ConsumerGroup,
		ReleaseLease: in.ReleaseLease, MaxKeys: uint32(l.MaxKeys)}
	for i, op := range in.Ops {
		at := fmt.Sprintf("state_ops[%d]: ", i)
		if op.Key == "" || len(op.Key) > streams.MaxKeyBytes || !utf8.ValidString(op.Key) {
			return nil, Bad(fmt.Sprintf("%skey must be a non-empty string of at most %d bytes", at, streams.MaxKeyBytes))
		}
		so := &command.StreamStateOp{Key: op.Key}
		switch op.Type {
		case "upsert":
			so.Value = op.Value
			if so.Value == nil {
				so.Value = []byte("{}") // as Queen's server stores a missing value
			}
			if len(so.Value) > l.MaxValueBytes {
				return nil, Bad(fmt.Sprintf("%svalue is %d bytes; at most %d", at, len(so.Value), l.MaxValueBytes))
			}
		case "delete":
			so.Type = command.StreamStateOp_DELETE
		default:
			return nil, Bad(at + `type must be "upsert" or "delete"`)
		}
		out.Ops = append(out.Ops, so)
	}
	if out.Pushes, err = Push(in.Pushes); err != nil {
		return nil, err
	}
	if a := in.Ack; a != nil {
		if a.TransactionID == "" {
			return nil, Bad("ack.transactionId is required")
		}
		if len(a.TransactionID) > MaxTxnIDBytes {
			return nil, Bad("ack.transactionId is too long")
		}
		if a.LeaseID == "" {
			return nil, Bad("ack.leaseId is required: a cycle's ack is fenced by the caller's lease")
		}
		st, ok := streamAckStatus[a.Status]
		if !ok {
			return nil, Bad(`ack.status must be "completed", "failed" or "dlq"`)
		}
		if a.Count < 0 || a.Count > 1<<31 {
			return nil, Bad("ack.count must be an integer >= 0")
		}
		out.Ack = &command.StreamAck{TransactionId: a.TransactionID, LeaseId: a.LeaseID, Status: st, Count: uint32(a.Count)}
	}
	return out, nil
}

// StreamStateGet is POST /streams/v1/state/get as decoded.
type StreamStateGet struct {
	QueryID, PartitionID, KeyPrefix string
	Keys                            []string
	Ripe                            *int64
}

// StreamStateQuery checks a state read and builds its query, without the
// query's source (the front end reads it and sets it).
func StreamStateQuery(in StreamStateGet) (*command.StreamStateGet, error) {
	qid, pid, err := streamIDs(in.QueryID, in.PartitionID)
	if err != nil {
		return nil, err
	}
	if len(in.Keys) > streams.DefaultMaxOps {
		return nil, Bad(fmt.Sprintf("%d keys; at most %d", len(in.Keys), streams.DefaultMaxOps))
	}
	out := &command.StreamStateGet{QueryId: qid, PartitionId: pid, Keys: in.Keys, KeyPrefix: in.KeyPrefix}
	if in.Ripe != nil {
		out.HasRipe, out.RipeAtOrBefore = true, *in.Ripe
	}
	return out, nil
}
