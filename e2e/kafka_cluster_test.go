package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Three nodes; an idempotent franz-go producer with acks=all produces
// while the leader is killed with SIGKILL (and restarted): every
// acknowledged record is read back exactly once, in order per partition.
func TestKafkaIdempotentProduceSurvivesLeaderKill(t *testing.T) {
	c := startKafkaCluster(t)
	leader := c.leader(20 * time.Second)
	admin := kafkaClient(t, c.kafkaSeeds())
	createTopic(t, admin, "payments", 3)

	prod := kafkaClient(t, c.kafkaSeeds(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1000),
		kgo.ProducerLinger(2*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	acked := map[string]*kgo.Record{}
	var failed atomic.Int64
	produce := func(from, to int) {
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Add(1)
			prod.Produce(ctx, &kgo.Record{Topic: "payments", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf(`{"payment":%d}`, i))},
				func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						failed.Add(1)
						return
					}
					mu.Lock()
					acked[string(r.Value)] = r
					mu.Unlock()
				})
			if i%10 == 0 {
				time.Sleep(3 * time.Millisecond)
			}
		}
		wg.Wait()
	}
	done := make(chan struct{})
	go func() { defer close(done); produce(0, 2000) }()
	time.Sleep(200 * time.Millisecond)
	killedAt := time.Now()
	leader.kill9()
	if _, took, err := c.awaitNewLeader(leader.ID(), killedAt, 20*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("a new leader after %v", took)
	}
	<-done
	leader.restart()
	c.waitRejoined(leader, 30*time.Second)
	produce(2000, 2100)
	if len(acked) < 1000 {
		t.Fatalf("only %d records acknowledged (%d failed): the producer did not get through the failover", len(acked), failed.Load())
	}

	// Read everything back from a fresh consumer, to the end offsets.
	seen := map[string]int{}
	last := map[int32]int64{}
	readAll(t, c.kafkaSeeds(), "payments", func(r *kgo.Record) {
		seen[string(r.Value)]++
		if r.Offset <= last[r.Partition] {
			t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, last[r.Partition])
		}
		last[r.Partition] = r.Offset
	})
	for v, r := range acked {
		if seen[v] != 1 {
			t.Fatalf("acknowledged record %s (partition %d offset %d) read %d times", v, r.Partition, r.Offset, seen[v])
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Fatalf("record %s written %d times", v, n)
		}
	}
	t.Logf("acknowledged %d, failed %d, read %d distinct", len(acked), failed.Load(), len(seen))
}
