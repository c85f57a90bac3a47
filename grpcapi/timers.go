package grpcapi

import (
	"context"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/request"
)

// The timer operations of the HTTP API (addendum §2) over gRPC.

// Timers schedules, reschedules and cancels timers as one entry.
func (s *Public) Timers(ctx context.Context, in *queenpb.TimersRequest) (*queenpb.TimersResponse, error) {
	idem, err := s.keyOf(ctx, in)
	if err != nil {
		return nil, publicStatus(err)
	}
	ops, err := request.TimerBatch(timerOps(in.Operations))
	if err != nil {
		return nil, s.refuse(ctx, idem, err)
	}
	res, err := propose[*command.TimerBatchResult](s, ctx, idem, &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: ops}}})
	if err != nil {
		return nil, err
	}
	if e := request.TimersVerdict(res); e != nil {
		return nil, publicStatus(e)
	}
	out := &queenpb.TimersResponse{Results: make([]*queenpb.TimerResult, len(res.Results))}
	for i, r := range res.Results {
		out.Results[i] = timerResultOut(r)
	}
	return out, nil
}

// CancelTimer cancels one timer.
func (s *Public) CancelTimer(ctx context.Context, in *queenpb.CancelTimerRequest) (*queenpb.TimerResult, error) {
	op, err := request.TimerCancel(in.Queue, in.TimerKey, in.Txn)
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.TimerBatchResult](s, ctx, nil, &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: []*command.TimerOp{op}}}})
	if err != nil {
		return nil, err
	}
	return timerResultOut(res.Results[0]), nil
}

// GetTimer peeks at a pending timer.
func (s *Public) GetTimer(ctx context.Context, in *queenpb.GetTimerRequest) (*queenpb.GetTimerResponse, error) {
	res, err := s.query(ctx, &command.Query{Body: &command.Query_Timer{Timer: &command.TimerGet{
		Queue: in.Queue, TimerKey: in.TimerKey}}})
	if err != nil {
		return nil, publicStatus(err)
	}
	t := res.GetTimer().GetTimer()
	if t == nil {
		return &queenpb.GetTimerResponse{}, nil
	}
	return &queenpb.GetTimerResponse{Found: true, Timer: timerOut(t, true)}, nil
}

// ListTimers pages through a queue's pending timers.
func (s *Public) ListTimers(ctx context.Context, in *queenpb.ListTimersRequest) (*queenpb.ListTimersResponse, error) {
	res, err := s.query(ctx, &command.Query{Body: &command.Query_Timers{Timers: &command.TimerList{
		Queue: in.Queue, After: in.After, Limit: int32(request.TimerListLimit(int64(in.Limit)))}}})
	if err != nil {
		return nil, publicStatus(err)
	}
	rows, truncated := res.GetTimers().GetTimers(), res.GetTimers().GetTruncated()
	out := &queenpb.ListTimersResponse{Truncated: truncated}
	for _, t := range rows {
		out.Timers = append(out.Timers, timerOut(t, false))
	}
	if truncated && len(rows) > 0 {
		out.NextAfter = rows[len(rows)-1].TimerKey
	}
	return out, nil
}

// CountTimers counts a queue's pending timers under a key prefix.
func (s *Public) CountTimers(ctx context.Context, in *queenpb.CountTimersRequest) (*queenpb.CountTimersResponse, error) {
	if err := request.TimerCountPrefix(in.Prefix); err != nil {
		return nil, publicStatus(err)
	}
	res, err := s.query(ctx, &command.Query{Body: &command.Query_TimerCount{TimerCount: &command.TimerCount{
		Queue: in.Queue, Prefix: in.Prefix}}})
	if err != nil {
		return nil, publicStatus(err)
	}
	return &queenpb.CountTimersResponse{Count: res.GetTimerCount().GetCount()}, nil
}

var timerStatuses = map[command.TimerResult_Status]queenpb.TimerStatus{
	command.TimerResult_SCHEDULED: queenpb.TimerStatus_TIMER_STATUS_SCHEDULED, command.TimerResult_RESCHEDULED: queenpb.TimerStatus_TIMER_STATUS_RESCHEDULED,
	command.TimerResult_CANCELLED: queenpb.TimerStatus_TIMER_STATUS_CANCELLED, command.TimerResult_ABSENT: queenpb.TimerStatus_TIMER_STATUS_ABSENT,
}

func timerResultOut(r *command.TimerResult) *queenpb.TimerResult {
	out := &queenpb.TimerResult{Ok: r.Ok, Status: timerStatuses[r.Status], Queue: r.Queue, TimerKey: r.TimerKey,
		Txn: r.Txn, OpIndex: r.OpIndex}
	if r.Status == command.TimerResult_SCHEDULED || r.Status == command.TimerResult_RESCHEDULED {
		out.MessageId, out.DeliverAt = uuidStr(r.MessageId), stamp(r.DeliverAtUs)
	}
	return out
}

func timerOut(t *command.TimerRecord, withPayload bool) *queenpb.Timer {
	out := &queenpb.Timer{
		Queue: t.Queue, TimerKey: t.TimerKey, Partition: t.Partition, DeliverAt: stamp(max(t.DeliverAtUs, t.BackoffUntilUs)),
		Txn: t.Txn, MessageId: uuidStr(t.MessageId), Encrypted: t.Encrypted, ProducerSub: t.ProducerSub,
		Attempts: t.Attempts, LastError: t.LastError, CreatedAt: stamp(t.CreatedUs), UpdatedAt: stamp(t.UpdatedUs),
	}
	if withPayload {
		out.Payload = t.Payload
	}
	return out
}
