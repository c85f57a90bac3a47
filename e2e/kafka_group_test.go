package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cuttable dials connections a test can cut all at once, refusing new
// ones after: a consumer that died without leaving its group.
type cuttable struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (c *cuttable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, fmt.Errorf("this consumer is dead")
	}
	conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = true
	for _, conn := range c.conns {
		conn.Close()
	}
}

// A group of three franz-go consumers shares a topic; one dies without
// leaving: after its session times out the other two take its partitions
// and resume from the committed offsets, so every record is consumed.
func TestKafkaGroupRebalancesWhenAConsumerDies(t *testing.T) {
	_, addr := startKafkaNode(t)
	admin := kafkaClient(t, []string{addr})
	createTopic(t, admin, "work", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	produce := func(from, to int) {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: "work", Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))})
		}
		p := kafkaClient(t, []string{addr}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 90)

	var mu sync.Mutex
	seen := map[string]bool{}
	owners := make([]map[int32]bool, 3)
	dialers := make([]*cuttable, 3)
	stop := make([]context.CancelFunc, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		dialers[i] = &cuttable{}
		owners[i] = map[int32]bool{}
		cl := kafkaClient(t, []string{addr}, kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("work"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.Dialer(dialers[i].dial),
			kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond), kgo.RebalanceTimeout(5*time.Second))
		cctx, c := context.WithCancel(ctx)
		stop[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					owners[i][r.Partition] = true
					mu.Unlock()
				})
				_ = cl.CommitRecords(cctx, fs.Records()...)
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	waitFor("the first 90 records", func() bool { return len(seen) == 90 })

	dialers[1].cut() // consumer 2 dies: no LeaveGroup, no more heartbeats
	stop[1]()
	mu.Lock()
	for i := range owners {
		owners[i] = map[int32]bool{}
	}
	mu.Unlock()
	produce(90, 300)
	waitFor("every record after the death of a consumer", func() bool { return len(seen) == 300 })
	mu.Lock()
	if len(owners[1]) != 0 || len(owners[0])+len(owners[2]) < 3 {
		t.Errorf("after the death: partitions read by consumer 1 %v, 2 %v, 3 %v", owners[0], owners[1], owners[2])
	}
	mu.Unlock()
	for _, s := range stop {
		s()
	}
	wg.Wait()
}
