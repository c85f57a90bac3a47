package queen_test

// How much faster is the gRPC transport than the HTTP API for the two hot
// paths, push and consume, on the same machine and the same node? Each
// benchmark starts one real in-process node (Raft with its fsynced log,
// the state file, both front ends on 127.0.0.1) and runs the same client
// code over each transport in turn:
//
//	go test -run '^$' -bench . -benchtime 20000x ./client/
//
// Figures are msgs/s (ns/op is per message or per call, as named).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const benchWorkers = 16

var payload = map[string]any{"orderId": "ORD-123456", "cents": 1999, "currency": "EUR", "customer": "cust-42"}

func benchClient(b *testing.B, n *grpctest.Node, tr string) *queen.Client {
	b.Helper()
	return dialNode(b, n, tr)
}

// BenchmarkPush: 16 producers, one message per call (the latency-bound
// case) and 100 per call (the throughput case). ns/op is per message.
func BenchmarkPush(b *testing.B) {
	n := grpctest.Start(b, grpctest.Options{})
	for _, per := range []int{1, 100} {
		for _, tr := range []string{"http", "grpc"} {
			b.Run(fmt.Sprintf("%s/batch=%d", tr, per), func(b *testing.B) {
				c := benchClient(b, n, tr)
				q := c.Queue(fmt.Sprintf("push-%s-%d-%d", tr, per, b.N))
				ctx := context.Background()
				calls := (b.N + per - 1) / per
				var next atomic.Int64
				b.ResetTimer()
				var wg sync.WaitGroup
				for range benchWorkers {
					wg.Go(func() {
						msgs := make([]queen.Msg, per)
						for next.Add(1) <= int64(calls) {
							for i := range msgs {
								msgs[i] = queen.Msg{Data: payload, Partition: "p"}
							}
							if _, err := q.Push(ctx, msgs...); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(calls*per)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// fill pushes count messages over 16 partitions, in batches of 500.
func fill(b *testing.B, c *queen.Client, queue string, count int) {
	b.Helper()
	q := c.Queue(queue)
	for done := 0; done < count; {
		msgs := make([]queen.Msg, 0, 500)
		for i := 0; i < 500 && done < count; i, done = i+1, done+1 {
			msgs = append(msgs, queen.Msg{Data: payload, Partition: fmt.Sprint("p", done%16)})
		}
		if _, err := q.Push(context.Background(), msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsume: a Consumer with 16 workers and batches of 10 drains
// b.N messages spread over 16 partitions: pop, handle (nothing), ack the
// batch. ns/op is per message.
func BenchmarkConsume(b *testing.B) {
	n := grpctest.Start(b, grpctest.Options{})
	for _, tr := range []string{"http", "grpc"} {
		b.Run(tr, func(b *testing.B) {
			c := benchClient(b, n, tr)
			queue := fmt.Sprintf("consume-%s-%d", tr, b.N)
			fill(b, c, queue, b.N)
			var handled atomic.Int64
			cons := c.Queue(queue).Consumer(queen.ConsumerOptions{Concurrency: benchWorkers, Batch: 10, Wait: time.Second})
			b.ResetTimer()
			err := cons.Run(context.Background(), func(ctx context.Context, m *queen.Message) error {
				if handled.Add(1) == int64(b.N) {
					cons.Stop()
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkConsumeStream: the same drain through the server-streaming
// Consume RPC (16 streams, batches of 10, the server renewing leases), each
// batch acked with one AckBatch. ns/op is per message.
func BenchmarkConsumeStream(b *testing.B) {
	n := grpctest.Start(b, grpctest.Options{})
	c := benchClient(b, n, "http")
	queue := fmt.Sprintf("stream-%d", b.N)
	fill(b, c, queue, b.N)
	conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	qc := pb.NewQueenClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	b.ResetTimer()
	for range benchWorkers {
		go func() {
			s, err := qc.Consume(ctx, &pb.ConsumeRequest{Pop: &pb.PopRequest{Queue: queue, Batch: 10, WaitMs: 1000}})
			if err != nil {
				return
			}
			for {
				batch, err := s.Recv()
				if err != nil {
					return
				}
				acks := &pb.AckBatchRequest{}
				for _, m := range batch.Messages {
					acks.Items = append(acks.Items, &pb.AckItem{TransactionId: m.TransactionId, PartitionId: m.PartitionId, LeaseId: m.LeaseId})
				}
				if _, err := qc.AckBatch(ctx, acks); err != nil {
					return
				}
				if handled.Add(int64(len(batch.Messages))) >= int64(b.N) {
					once.Do(func() { close(done) })
				}
			}
		}()
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
