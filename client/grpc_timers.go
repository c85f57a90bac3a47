package queen

import (
	"context"

	"google.golang.org/grpc/codes"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The gRPC transport's timer calls (queen.v1 Timers, CancelTimer, GetTimer,
// ListTimers, CountTimers).

var timerKinds = map[string]pb.TimerOpKind{
	"schedule": pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, "reschedule": pb.TimerOpKind_TIMER_OP_KIND_RESCHEDULE,
	"cancel": pb.TimerOpKind_TIMER_OP_KIND_CANCEL,
}

func toPBTimer(op timerOp) *pb.TimerOp {
	out := &pb.TimerOp{Op: timerKinds[op.Op], Queue: op.Queue, TimerKey: op.Key, Txn: op.Txn}
	if op.Partition != "" {
		out.Partition = &op.Partition
	}
	if op.Op != "cancel" {
		out.DelayMs, out.Payload = &op.DelayMs, op.Payload
	}
	return out
}

func toPBTimers(ops []timerOp) []*pb.TimerOp {
	out := make([]*pb.TimerOp, len(ops))
	for i, op := range ops {
		out[i] = toPBTimer(op)
	}
	return out
}

var timerStatusNames = map[pb.TimerStatus]TimerStatus{
	pb.TimerStatus_TIMER_STATUS_SCHEDULED: TimerScheduled, pb.TimerStatus_TIMER_STATUS_RESCHEDULED: TimerRescheduled,
	pb.TimerStatus_TIMER_STATUS_CANCELLED: TimerCancelled, pb.TimerStatus_TIMER_STATUS_ABSENT: TimerAbsent,
}

func fromPBTimerResult(r *pb.TimerResult) TimerResult {
	return TimerResult{OK: r.Ok, Status: timerStatusNames[r.Status], Queue: r.Queue, Key: r.TimerKey, TransactionID: r.Txn,
		MessageID: r.MessageId, DeliverAt: asTime(r.DeliverAt)}
}

func fromPBTimer(t *pb.Timer) Timer {
	return Timer{Found: true, Queue: t.Queue, Key: t.TimerKey, Partition: t.Partition, DeliverAt: asTime(t.DeliverAt),
		TransactionID: t.Txn, MessageID: t.MessageId, Data: t.Payload, Encrypted: t.Encrypted, ProducerSub: t.ProducerSub,
		Attempts: int(t.Attempts), LastError: t.LastError, CreatedAt: asTime(t.CreatedAt), UpdatedAt: asTime(t.UpdatedAt)}
}

func (t *grpcTransport) timers(ctx context.Context, ops []timerOp) ([]TimerResult, error) {
	out, err := t.c.Timers(ctx, &pb.TimersRequest{Operations: toPBTimers(ops)})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := make([]TimerResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = fromPBTimerResult(r)
	}
	return res, nil
}

func (t *grpcTransport) cancelTimer(ctx context.Context, queue, key, txn string) (*TimerResult, error) {
	out, err := t.c.CancelTimer(ctx, &pb.CancelTimerRequest{Queue: queue, TimerKey: key, Txn: txn})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	r := fromPBTimerResult(out)
	return &r, nil
}

func (t *grpcTransport) getTimer(ctx context.Context, queue, key string) (*Timer, error) {
	out, err := t.c.GetTimer(ctx, &pb.GetTimerRequest{Queue: queue, TimerKey: key})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	if !out.Found || out.Timer == nil {
		return &Timer{Queue: queue, Key: key}, nil
	}
	tm := fromPBTimer(out.Timer)
	return &tm, nil
}

func (t *grpcTransport) listTimers(ctx context.Context, queue, after string, limit int) (*TimerPage, error) {
	out, err := t.c.ListTimers(ctx, &pb.ListTimersRequest{Queue: queue, After: after, Limit: uint32(max(limit, 0))})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	page := &TimerPage{Truncated: out.Truncated, NextAfter: out.NextAfter}
	for _, tm := range out.Timers {
		page.Timers = append(page.Timers, fromPBTimer(tm))
	}
	return page, nil
}

func (t *grpcTransport) countTimers(ctx context.Context, queue, prefix string) (int, error) {
	out, err := t.c.CountTimers(ctx, &pb.CountTimersRequest{Queue: queue, Prefix: prefix})
	if err != nil {
		return 0, wrap(ctx, err)
	}
	return int(out.Count), nil
}

// queueStats: queen.v1 has no queue detail; the HTTP API serves it.
func (t *grpcTransport) queueStats(context.Context, string) (*QueueStats, error) {
	return nil, &Error{Code: codes.Unimplemented, grpc: true,
		Message: "queue stats are served by the HTTP API only (queen.v1 has no queue detail); use an http:// client"}
}
