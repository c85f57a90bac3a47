package grpcapi

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/request"
)

// Message inspection and deletion, dead-letter replay and purge, and
// traces: the HTTP routes of spec §4.9, §4.15 over gRPC, through the same
// rules (package request) and the same one rule naming a message
// (queue.Reader.FindMessage).

func isoOrEmpty(us int64) string {
	if us == 0 {
		return ""
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z")
}

func messageRowOut(r fsm.MessageRow) *queenpb.MessageRow {
	m := r.Message
	return &queenpb.MessageRow{Id: uuidStr(m.Id), TransactionId: m.TransactionId, PartitionId: uuidStr(r.Partition.Id),
		Queue: r.Queue.Name, Partition: r.Partition.Name, Namespace: r.Queue.Namespace, Task: r.Queue.Task,
		Status: r.Status, QueueStatus: r.QueueStatus, ConsumedBy: int32(r.ConsumedBy), TotalGroups: int32(r.TotalGroups),
		TraceId: m.TraceId, ProducerSub: m.ProducerSub, QueuePriority: r.Queue.Options.GetPriority(),
		CreatedAt: isoOrEmpty(m.CreatedUs), LeaseExpiresAt: isoOrEmpty(r.LeaseExpiresUs)}
}

// scopedPartition refuses a scoped caller a partition of another queue.
func (s *Public) scopedPartition(ctx context.Context, pid []byte) error {
	if !auth.IdentityFrom(ctx).Scoped() {
		return nil
	}
	if q, ok := s.node.PartitionQueue(ctx, pid); ok && auth.InScope(ctx, q) {
		return nil
	}
	return status.Error(codes.PermissionDenied, auth.ErrInsufficient.Msg)
}

func visibleTo(ctx context.Context) func(string) bool {
	if id := auth.IdentityFrom(ctx); id.Scoped() {
		return id.Touches
	}
	return nil
}

// ListMessages lists messages newest first.
func (s *Public) ListMessages(ctx context.Context, in *queenpb.ListMessagesRequest) (*queenpb.ListMessagesResponse, error) {
	f, err := request.ListMessages(request.MessageQuery{Queue: in.Queue, Partition: in.Partition, Namespace: in.Namespace,
		Task: in.Task, Status: in.Status, From: in.From, To: in.To, Limit: in.Limit, Offset: in.Offset}, s.node.Now())
	if err != nil {
		return nil, publicStatus(err)
	}
	f.Visible = visibleTo(ctx)
	var rows []fsm.MessageRow
	var mode fsm.MessagesMode
	err = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) (err error) {
		rows, mode, err = rd.ListMessages(f, s.node.Now())
		return err
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	out := &queenpb.ListMessagesResponse{HasQueueMode: mode.HasQueueMode, BusGroups: int32(mode.BusGroups), Mode: mode.Type()}
	for _, r := range rows {
		out.Messages = append(out.Messages, messageRowOut(r))
	}
	return out, nil
}

func (s *Public) messageRef(ctx context.Context, in *queenpb.MessageRef) ([]byte, error) {
	pid, err := request.MessageRef(in.PartitionId, in.TransactionId)
	if err != nil {
		return nil, publicStatus(err)
	}
	return pid, s.scopedPartition(ctx, pid)
}

// GetMessage reads one message; NOT_FOUND when the pair names none.
func (s *Public) GetMessage(ctx context.Context, in *queenpb.MessageRef) (*queenpb.MessageDetail, error) {
	pid, err := s.messageRef(ctx, in)
	if err != nil {
		return nil, err
	}
	var d *fsm.MessageDetail
	err = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) (err error) {
		d, err = rd.MessageDetail(pid, in.TransactionId, s.node.Now())
		return err
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	if d == nil {
		return nil, publicStatus(request.MessageNotFound())
	}
	out := &queenpb.MessageDetail{Message: messageRowOut(d.MessageRow), Payload: d.Message.Payload, Mode: d.Mode.Type()}
	for _, g := range d.Groups {
		out.ConsumerGroups = append(out.ConsumerGroups, &queenpb.MessageGroup{Name: g.Name, Consumed: g.Consumed,
			LeaseExpiresAt: isoOrEmpty(g.LeaseExpiresUs)})
	}
	for _, dl := range d.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, &queenpb.DeadLetterRef{DlqId: queue.DeadLetterID(dl.RecordId),
			ConsumerGroup: dl.ConsumerGroup, ErrorMessage: dl.Error, RetryCount: dl.RetryCount, FailedAt: isoOrEmpty(dl.FailedUs)})
	}
	return out, nil
}

// find reads which message (pid, txn) names: its seq (0 = none) and its
// partition's queue.
func (s *Public) find(ctx context.Context, pid []byte, txn string) (uint64, error) {
	var seq uint64
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		_, seq = rd.FindMessage(pid, txn)
		return nil
	})
	return seq, err
}

// DeleteMessage deletes one message; success false when the pair names none.
func (s *Public) DeleteMessage(ctx context.Context, in *queenpb.MessageRef) (*queenpb.DeleteMessageResponse, error) {
	pid, err := s.messageRef(ctx, in)
	if err != nil {
		return nil, err
	}
	seq, err := s.find(ctx, pid, in.TransactionId)
	if err != nil {
		return nil, publicStatus(err)
	}
	if seq != 0 {
		res, err := propose[*command.DeleteMessageResult](s, ctx, nil, request.DeleteMessage(pid, seq, in.TransactionId))
		if err != nil {
			return nil, err
		}
		if res.Deleted {
			return &queenpb.DeleteMessageResponse{Success: true, Message: "Message deleted successfully"}, nil
		}
	}
	return &queenpb.DeleteMessageResponse{Message: "Message not found"}, nil
}

// ReplayDeadLetter moves a dead letter back: NOT_FOUND (reason gone) when
// the record is not there.
func (s *Public) ReplayDeadLetter(ctx context.Context, in *queenpb.ReplayDeadLetterRequest) (*queenpb.ReplayDeadLetterResponse, error) {
	to := request.Destination{Queue: in.Queue, Partition: in.Partition}
	var cmd *command.Command
	var err error
	if in.DlqId != "" {
		var id []byte
		if id, err = request.DeadLetterID(in.DlqId); err != nil {
			return nil, publicStatus(err)
		}
		var src string
		err = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
			if d := rd.Reader.DeadLetterByID(id); d != nil {
				src = d.Queue
			}
			return nil
		})
		if err != nil {
			return nil, publicStatus(err)
		}
		if src == "" {
			return nil, publicStatus(request.DeadLetterGone())
		}
		cmd, err = request.ReplayByID(id, src, to)
	} else {
		var pid []byte
		if pid, err = request.MessageRef(in.PartitionId, in.TransactionId); err != nil {
			return nil, publicStatus(err)
		}
		if err = request.CheckName("consumerGroup", in.ConsumerGroup); err != nil {
			return nil, publicStatus(err)
		}
		var rec *command.DLQRecord
		err = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
			rec = rd.Reader.DeadLetterOf(pid, in.TransactionId, in.ConsumerGroup)
			return nil
		})
		if err != nil {
			return nil, publicStatus(err)
		}
		if rec == nil {
			return nil, publicStatus(request.DeadLetterGone())
		}
		cmd, err = request.ReplayByID(rec.RecordId, rec.Queue, to)
	}
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.ReplayResult](s, ctx, nil, cmd)
	if err != nil {
		return nil, err
	}
	if e := request.ReplayVerdict(res); e != nil {
		return nil, publicStatus(e)
	}
	return &queenpb.ReplayDeadLetterResponse{Success: res.Verdict == command.ReplayResult_MOVED,
		Verdict: request.VerdictText(res.Verdict), DlqId: queue.DeadLetterID(res.RecordId), ConsumerGroup: res.ConsumerGroup,
		Queue: res.Queue, Partition: res.Partition, PartitionId: uuidStr(res.PartitionId), TransactionId: res.TransactionId,
		MessageId: uuidStr(res.MessageId), Offset: res.Offset, Error: res.Error}, nil
}

// PurgeDeadLetters removes one queue's dead letters, in bounded entries.
func (s *Public) PurgeDeadLetters(ctx context.Context, in *queenpb.PurgeDeadLettersRequest) (*queenpb.PurgeDeadLettersResponse, error) {
	cmd, err := request.PurgeDLQ(in.Queue, in.ConsumerGroup)
	if err != nil {
		return nil, publicStatus(err)
	}
	out := &queenpb.PurgeDeadLettersResponse{}
	for {
		res, err := propose[*command.PurgeResult](s, ctx, nil, cmd)
		if err != nil {
			return nil, err
		}
		out.Purged += res.Purged
		if !res.More || res.Purged == 0 {
			return out, nil
		}
	}
}

// RecordTrace records a trace event; NOT_FOUND when the message is unknown.
func (s *Public) RecordTrace(ctx context.Context, in *queenpb.RecordTraceRequest) (*queenpb.RecordTraceResponse, error) {
	tr := request.Trace{ConsumerGroup: in.ConsumerGroup, TraceNames: in.TraceNames, EventType: in.EventType, WorkerID: in.WorkerId}
	if in.TransactionId != "" {
		tr.TransactionID = &in.TransactionId
	}
	if in.PartitionId != "" {
		tr.PartitionID = &in.PartitionId
	}
	pid, err := request.TraceRef(tr)
	if err == nil && in.Data == nil {
		err = request.Bad("data is required")
	}
	if err == nil {
		tr.Data, err = request.JSONValue("data", in.Data)
	}
	if err != nil {
		return nil, publicStatus(err)
	}
	if err := s.scopedPartition(ctx, pid); err != nil {
		return nil, err
	}
	seq, err := s.find(ctx, pid, in.TransactionId)
	if err != nil {
		return nil, publicStatus(err)
	}
	if seq == 0 {
		return nil, publicStatus(request.MessageNotFound())
	}
	cmd, err := request.RecordTrace(tr, pid, seq)
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.TraceResult](s, ctx, nil, cmd)
	if err != nil {
		return nil, err
	}
	if !res.Found {
		return nil, publicStatus(request.MessageNotFound())
	}
	return &queenpb.RecordTraceResponse{TraceId: uuidStr(res.TraceId)}, nil
}

func traceOut(t *command.TraceRecord) *queenpb.Trace {
	return &queenpb.Trace{Id: uuidStr(t.Id), EventType: t.EventType, Data: t.Data, ConsumerGroup: t.ConsumerGroup,
		WorkerId: t.WorkerId, CreatedAt: isoOrEmpty(t.CreatedUs), TraceNames: t.TraceNames, TransactionId: t.TransactionId,
		PartitionId: uuidStr(t.PartitionId), Queue: t.Queue, Partition: t.Partition}
}

// ListTraces lists the traces of the message the pair names.
func (s *Public) ListTraces(ctx context.Context, in *queenpb.MessageRef) (*queenpb.ListTracesResponse, error) {
	pid, err := s.messageRef(ctx, in)
	if err != nil {
		return nil, err
	}
	out := &queenpb.ListTracesResponse{}
	err = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		if p, seq := rd.FindMessage(pid, in.TransactionId); seq != 0 {
			for _, t := range rd.Traces(p.Id, seq) {
				out.Traces = append(out.Traces, traceOut(t))
			}
		}
		return nil
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	out.Total = int64(len(out.Traces))
	return out, nil
}

// TracesByName lists traces by name, newest first.
func (s *Public) TracesByName(ctx context.Context, in *queenpb.TracesByNameRequest) (*queenpb.ListTracesResponse, error) {
	if err := request.TraceName(in.Name); err != nil {
		return nil, publicStatus(err)
	}
	limit, offset := request.Page(in.Limit, in.Offset, request.DefaultTraceList)
	var rows []fsm.TraceWithMessage
	var total int
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) (err error) {
		rows, total, err = rd.TracesByName(in.Name, visibleTo(ctx), offset, limit)
		return err
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	out := &queenpb.ListTracesResponse{Total: int64(total)}
	for _, r := range rows {
		t := traceOut(r.TraceRecord)
		t.MessagePayload = r.Payload
		out.Traces = append(out.Traces, t)
	}
	return out, nil
}

// TraceNames lists the trace names with their counts.
func (s *Public) TraceNames(ctx context.Context, in *queenpb.TraceNamesRequest) (*queenpb.TraceNamesResponse, error) {
	limit, offset := request.Page(in.Limit, in.Offset, request.DefaultTraceNames)
	out := &queenpb.TraceNamesResponse{}
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		names := rd.TraceNames(visibleTo(ctx))
		out.Total = int64(len(names))
		for i := offset; i < len(names) && len(out.Names) < limit; i++ {
			n := names[i]
			out.Names = append(out.Names, &queenpb.TraceName{Name: n.Name, TraceCount: int64(n.Traces),
				MessageCount: int64(n.Messages), LastSeen: isoOrEmpty(n.LastSeenUs)})
		}
		return nil
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	return out, nil
}

// QueueDepth is what a queue holds for one group (addendum §8).
func (s *Public) QueueDepth(ctx context.Context, in *queenpb.QueueDepthRequest) (*queenpb.QueueDepthResponse, error) {
	if !auth.InScope(ctx, in.Queue) {
		return nil, status.Error(codes.PermissionDenied, auth.ErrInsufficient.Msg)
	}
	var d fsm.Depth
	var found bool
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		d, found = rd.Depth(in.Queue, in.ConsumerGroup, s.node.Now())
		return nil
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	if !found {
		return nil, status.Error(codes.NotFound, "Queue not found")
	}
	out := &queenpb.QueueDepthResponse{Pending: d.Pending, PartitionsPending: d.PartitionsPending, Conflation: d.Conflation,
		EffectivePending: d.EffectivePending, Processing: d.Processing, Ready: d.Ready, PartitionsReady: d.PartitionsReady,
		EffectiveReady: d.EffectiveReady}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, &queenpb.PartitionDepth{Partition: p.Partition, Pending: p.Pending,
			Processing: p.Processing, Ready: p.Ready})
	}
	return out, nil
}
