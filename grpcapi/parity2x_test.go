package grpcapi_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The 2.x additions over gRPC: positions in a transaction, conflation on
// a pop (with its echo and refusals), and the queue's depth.
func TestPositionsConflationAndDepthOverGRPC(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	var items []*pb.PushItem
	for _, id := range []string{"m1", "m2", "m3"} {
		items = append(items, &pb.PushItem{Queue: "gq", Partition: "p", TransactionId: id})
	}
	if _, err := c.Push(ctx, &pb.PushRequest{Items: items}); err != nil {
		t.Fatal(err)
	}
	// A position: group g reads p from offset 3.
	res, err := c.Transaction(ctx, &pb.TransactionRequest{Positions: []*pb.Position{{Queue: "gq", ConsumerGroup: "g", Partition: "p", Offset: 3}}})
	if err != nil || !res.Success || len(res.Results) != 1 || res.Results[0].Type != "position" {
		t.Fatalf("position: %v %v", res, err)
	}
	pop, err := c.Pop(ctx, &pb.PopRequest{Queue: "gq", ConsumerGroup: "g", Batch: 10})
	if err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionId != "m3" {
		t.Fatalf("after the position: %v %v", pop, err)
	}
	res, err = c.Transaction(ctx, &pb.TransactionRequest{Positions: []*pb.Position{{Queue: "nope", ConsumerGroup: "g", Offset: 1}}})
	if err != nil || res.Success || res.Reason != "queue_not_found" {
		t.Fatalf("a position in no queue: %v %v", res, err)
	}

	// Conflation: the newest only, echoed; refused for queue mode.
	pop, err = c.Pop(ctx, &pb.PopRequest{Queue: "gq", ConsumerGroup: "ui", Batch: 10, SubscriptionMode: pb.SubscriptionMode_SUBSCRIPTION_MODE_ALL, Conflation: proto.Bool(true)})
	if err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionId != "m3" || !pop.GetConflation() {
		t.Fatalf("a conflated pop: %v %v", pop, err)
	}
	if _, err := c.Pop(ctx, &pb.PopRequest{Queue: "gq", Conflation: proto.Bool(true)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("conflation in queue mode: %v", err)
	}

	d, err := c.QueueDepth(ctx, &pb.QueueDepthRequest{Queue: "gq", ConsumerGroup: "ui"})
	if err != nil || d.Pending != 3 || d.Processing != 3 || len(d.Partitions) != 1 {
		t.Fatalf("depth for ui: %v %v", d, err)
	}
	if _, err := c.QueueDepth(ctx, &pb.QueueDepthRequest{Queue: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("depth of no queue: %v", err)
	}
}
