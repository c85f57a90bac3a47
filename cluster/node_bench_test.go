package cluster

// Benchmarks of the write path through real Raft and a durable log, without
// HTTP. BenchmarkApplyConcurrent answers: how many single-message pushes per
// second does group commit give N concurrent writers?

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
)

func BenchmarkApplyConcurrent(b *testing.B) {
	for _, writers := range []int{1, 20} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			n := mustStartNode(b)
			var seq atomic.Int64
			payload := make([]byte, 256)
			for i := range payload {
				payload[i] = 'x'
			}
			payload[0], payload[255] = '"', '"'
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/writers + 1
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						id := uuid.Must(uuid.NewV7())
						_, err := n.Apply(context.Background(), &command.Command{Body: &command.Command_Push{Push: &command.Push{
							Items: []*command.PushItem{{Queue: "q", Partition: "Default", TransactionId: fmt.Sprint(seq.Add(1)), Payload: payload, MessageId: id[:]}},
						}}})
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*writers)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
