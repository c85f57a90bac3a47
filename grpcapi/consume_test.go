package grpcapi_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// batches pumps a Consume stream into a channel; the channel closes with
// the stream, and *errp is then the stream's error.
func batches(s pb.Queen_ConsumeClient, errp *error) <-chan *pb.PopResponse {
	ch := make(chan *pb.PopResponse, 16)
	go func() {
		defer close(ch)
		for {
			r, err := s.Recv()
			if err != nil {
				*errp = err
				return
			}
			ch <- r
		}
	}()
	return ch
}

// next is the next batch within d; nil when none came.
func next(ch <-chan *pb.PopResponse, d time.Duration) *pb.PopResponse {
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		return nil
	}
}

// A 2 s lease, held for 3 s: the stream renews it, so the ack afterwards
// succeeds. The same hold on a plain pop loses the lease.
func TestConsumeRenewsLeaseUntilAcked(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	for _, q := range []string{"renewed", "plain"} {
		if _, err := c.Configure(ctx, &pb.ConfigureRequest{Queue: q, Options: &pb.QueueOptions{LeaseTime: proto.Int64(2)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: q, TransactionId: "m1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := c.Consume(ctx, &pb.ConsumeRequest{Pop: &pb.PopRequest{Queue: "renewed", WaitMs: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	b := next(batches(stream, &serr), 5*time.Second)
	if b == nil || len(b.Messages) != 1 {
		t.Fatalf("consume: %v %v", b, serr)
	}
	plain, err := c.Pop(ctx, &pb.PopRequest{Queue: "plain"})
	if err != nil || len(plain.Messages) != 1 {
		t.Fatalf("pop: %v %v", plain, err)
	}
	time.Sleep(3 * time.Second)

	m := b.Messages[0]
	ack, err := c.Ack(ctx, &pb.AckRequest{TransactionId: m.TransactionId, PartitionId: m.PartitionId, LeaseId: m.LeaseId})
	if err != nil || !ack.Result.Success || !ack.Result.LeaseReleased {
		t.Fatalf("ack after 3 s under a renewed 2 s lease: %v %v", ack, err)
	}
	p := plain.Messages[0]
	ack, err = c.Ack(ctx, &pb.AckRequest{TransactionId: p.TransactionId, PartitionId: p.PartitionId, LeaseId: p.LeaseId})
	if err != nil || ack.Result.Success {
		t.Fatalf("ack after 3 s under a plain 2 s lease should be refused: %v %v", ack, err)
	}
}

// With max_unacked_batches 1 the stream pops the next batch only once the
// previous one is acked.
func TestConsumeWaitsForAck(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{
		{Queue: "pf", Partition: "a", TransactionId: "a1"}, {Queue: "pf", Partition: "b", TransactionId: "b1"}}}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Consume(ctx, &pb.ConsumeRequest{Pop: &pb.PopRequest{Queue: "pf", WaitMs: 500}})
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	ch := batches(stream, &serr)
	first := next(ch, 5*time.Second)
	if first == nil || len(first.Messages) != 1 {
		t.Fatalf("first batch: %v %v", first, serr)
	}
	if early := next(ch, 700*time.Millisecond); early != nil {
		t.Fatalf("second batch before the first was acked: %v", early)
	}
	m := first.Messages[0]
	if _, err := c.Ack(ctx, &pb.AckRequest{TransactionId: m.TransactionId, PartitionId: m.PartitionId, LeaseId: m.LeaseId}); err != nil {
		t.Fatal(err)
	}
	second := next(ch, 5*time.Second)
	if second == nil || len(second.Messages) != 1 || second.Messages[0].PartitionId == m.PartitionId {
		t.Fatalf("second batch: %v %v", second, serr)
	}
}

// A stream ends with UNAVAILABLE when the node starts to stop, so that a
// graceful server stop does not wait for it.
func TestConsumeEndsOnDrain(t *testing.T) {
	n, c, _ := dial(t)
	ctx := ctxT(t)
	stream, err := c.Consume(ctx, &pb.ConsumeRequest{Pop: &pb.PopRequest{Queue: "idle", WaitMs: 30000}})
	if err != nil {
		t.Fatal(err)
	}
	waitParked(t, n, 1) // the stream's pop waits
	n.Drain()
	var serr error
	ch := batches(stream, &serr)
	select {
	case <-ch: // closed: the stream ended
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after drain")
	}
	if status.Code(serr) != codes.Unavailable {
		t.Fatalf("after drain: %v, want UNAVAILABLE", serr)
	}
}
