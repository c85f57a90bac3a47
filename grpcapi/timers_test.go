package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The timer operations of the HTTP API, over gRPC: schedule, peek, list,
// count, cancel, and timers inside a transaction, through the same rules.
func TestTimers(t *testing.T) {
	n, c, _ := dial(t)
	ctx := ctxT(t)
	day := float64(24 * 3600 * 1000)
	res, err := c.Timers(ctx, &pb.TimersRequest{Operations: []*pb.TimerOp{
		{Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "bookings", TimerKey: "hold:1", DelayMs: proto.Float64(day), Txn: "release-1", Payload: []byte(`{"b":1}`)},
		{Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "bookings", TimerKey: "hold:2", DelayMs: proto.Float64(day), Txn: "release-2", Payload: []byte{0xff}},
		{Op: pb.TimerOpKind_TIMER_OP_KIND_CANCEL, Queue: "bookings", TimerKey: "nothing", Txn: "echo"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results
	if len(r) != 3 || r[0].Status != pb.TimerStatus_TIMER_STATUS_SCHEDULED || r[0].MessageId == "" || r[0].DeliverAt == nil ||
		r[2].Status != pb.TimerStatus_TIMER_STATUS_ABSENT || r[2].Ok || r[2].Txn != "echo" {
		t.Fatalf("results: %v", r)
	}
	got, err := c.GetTimer(ctx, &pb.GetTimerRequest{Queue: "bookings", TimerKey: "hold:2"})
	if err != nil || !got.Found || got.Timer.Txn != "release-2" || string(got.Timer.Payload) != `{"_raw_b64":"/w=="}` {
		t.Fatalf("peek: %v %v", got, err)
	}
	if none, err := c.GetTimer(ctx, &pb.GetTimerRequest{Queue: "bookings", TimerKey: "hold:9"}); err != nil || none.Found {
		t.Fatalf("peek of nothing: %v %v", none, err)
	}
	page, err := c.ListTimers(ctx, &pb.ListTimersRequest{Queue: "bookings", Limit: 1})
	if err != nil || len(page.Timers) != 1 || !page.Truncated || page.NextAfter != "hold:1" || page.Timers[0].Payload != nil {
		t.Fatalf("list: %v %v", page, err)
	}
	count, err := c.CountTimers(ctx, &pb.CountTimersRequest{Queue: "bookings", Prefix: "hold:"})
	if err != nil || count.Count != 2 {
		t.Fatalf("count: %v %v", count, err)
	}
	if _, err := c.CountTimers(ctx, &pb.CountTimersRequest{Queue: "bookings"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("count without prefix: %v", err)
	}
	cancelled, err := c.CancelTimer(ctx, &pb.CancelTimerRequest{Queue: "bookings", TimerKey: "hold:1"})
	if err != nil || cancelled.Status != pb.TimerStatus_TIMER_STATUS_CANCELLED || cancelled.Txn != "release-1" {
		t.Fatalf("cancel: %v %v", cancelled, err)
	}
	// In a transaction, with the standalone horizon lifted.
	txn, err := c.Transaction(ctx, &pb.TransactionRequest{
		Operations: []*pb.TransactionOp{{Op: &pb.TransactionOp_Push{Push: &pb.PushItem{Queue: "bookings", TransactionId: "b-3"}}}},
		Timers: []*pb.TimerOp{{Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "bookings", TimerKey: "hold:3",
			DelayMs: proto.Float64(100 * day), Txn: "release-3", Payload: []byte(`{}`)}},
	})
	if err != nil || !txn.Success || len(txn.Results) != 2 || txn.Results[1].Type != "timer" ||
		txn.Results[1].Timer.Status != pb.TimerStatus_TIMER_STATUS_SCHEDULED {
		t.Fatalf("transaction with a timer: %v %v", txn, err)
	}
	_ = n
}

func TestTimersRefuseBadInput(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	cases := map[string]*pb.TimerOp{
		"no kind":         {Queue: "q", TimerKey: "k"},
		"no delay":        {Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "q", TimerKey: "k", Txn: "t"},
		"no txn":          {Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "q", TimerKey: "k", DelayMs: proto.Float64(1)},
		"empty queue":     {Op: pb.TimerOpKind_TIMER_OP_KIND_CANCEL, TimerKey: "k"},
		"empty partition": {Op: pb.TimerOpKind_TIMER_OP_KIND_CANCEL, Queue: "q", TimerKey: "k", Partition: proto.String("")},
	}
	for name, op := range cases {
		if _, err := c.Timers(ctx, &pb.TimersRequest{Operations: []*pb.TimerOp{op}}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := c.Timers(ctx, &pb.TimersRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no ops: %v", err)
	}
	beyond := &pb.TimerOp{Op: pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE, Queue: "q", TimerKey: "k", Txn: "t", DelayMs: proto.Float64(91 * 24 * 3600 * 1000)}
	if _, err := c.Timers(ctx, &pb.TimersRequest{Operations: []*pb.TimerOp{beyond}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("beyond the horizon: %v", err)
	}
	if count, err := c.CountTimers(ctx, &pb.CountTimersRequest{Queue: "q", Prefix: "k"}); err != nil || count.Count != 0 {
		t.Fatalf("a refused op scheduled something: %v %v", count, err)
	}
}

// The idempotency-key metadata works as the HTTP API's Idempotency-Key: a
// retry is answered from the first outcome (flagged), the key with another
// request is refused, and a refusal is stored too.
func TestIdempotencyKeyOverGRPC(t *testing.T) {
	_, c, _ := dial(t)
	keyed := func(key string) (context.Context, *metadata.MD) {
		var hdr metadata.MD
		return metadata.AppendToOutgoingContext(ctxT(t), "idempotency-key", key), &hdr
	}
	push := &pb.PushRequest{Items: []*pb.PushItem{{Queue: "idem", Payload: []byte(`1`)}}} // no transactionId: only the key dedups
	ctx, hdr := keyed("k-1")
	first, err := c.Push(ctx, push)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Push(ctx, push, grpc.Header(hdr))
	if err != nil || again.Results[0].MessageId != first.Results[0].MessageId || hdr.Get("idempotent-replayed")[0] != "true" {
		t.Fatalf("replay: %v %v %v", again, hdr, err)
	}
	other := &pb.PushRequest{Items: []*pb.PushItem{{Queue: "idem", Payload: []byte(`2`)}}}
	if _, err := c.Push(ctx, other); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("the key with another request: %v", err)
	}
	bad := &pb.PushRequest{Items: []*pb.PushItem{{Queue: "idem", TraceId: "not-a-uuid"}}}
	bctx, _ := keyed("k-bad")
	if _, err := c.Push(bctx, bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad request with a key: %v", err)
	}
	var bh metadata.MD
	if _, err := c.Push(bctx, bad, grpc.Header(&bh)); status.Code(err) != codes.InvalidArgument || len(bh.Get("idempotent-replayed")) == 0 {
		t.Fatalf("the stored refusal: %v %v", err, bh)
	}
	pop, err := c.Pop(ctxT(t), &pb.PopRequest{Queue: "idem", Batch: 10})
	if err != nil || len(pop.Messages) != 1 {
		t.Fatalf("one message for three keyed pushes: %v %v", pop, err)
	}
	if _, err := c.Push(metadata.AppendToOutgoingContext(ctxT(t), "idempotency-key", strings.Repeat("k", 256)), push); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a key that is too long: %v", err)
	}
}
