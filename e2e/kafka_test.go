package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A franz-go producer and a consumer group against one node: every key,
// value (binary included), header and timestamp comes back byte for byte,
// offsets are the Queen offsets, the committed offsets are the group's
// Queen position, a Queen pop sees the JSON view, and a Queen pop with the
// Kafka group's name is refused.
func TestKafkaRoundTripWithFranzGo(t *testing.T) {
	n, addr := startKafkaNode(t)
	cl := kafkaClient(t, []string{addr})
	createTopic(t, cl, "orders", 3)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sent []*kgo.Record
	for i := 0; i < 30; i++ {
		value := []byte(fmt.Sprintf(`{"order":%d}`, i))
		if i%3 == 0 {
			value = []byte{0, 1, 2, 0xff, byte(i)} // not JSON
		}
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 3), Key: []byte("k" + strconv.Itoa(i)), Value: value,
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i), 0}}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))}
		sent = append(sent, r)
	}
	prod := kafkaClient(t, []string{addr}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range sent {
		if r.Offset < 1 {
			t.Fatalf("record offset %d: Queen offsets start at 1", r.Offset)
		}
	}

	cons := kafkaClient(t, []string{addr}, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := map[string]*kgo.Record{}
	for len(got) < len(sent) && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r })
	}
	for _, s := range sent {
		g := got[string(s.Key)]
		if g == nil {
			t.Fatalf("record %s never fetched", s.Key)
		}
		if !bytes.Equal(g.Value, s.Value) || g.Partition != s.Partition || g.Offset != s.Offset ||
			!g.Timestamp.Equal(s.Timestamp) || len(g.Headers) != 1 || !bytes.Equal(g.Headers[0].Value, s.Headers[0].Value) {
			t.Fatalf("record %s: got %+v, sent %+v", s.Key, g, s)
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	// The committed offsets are the group's Queen position.
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		o, ok := offs.Lookup("orders", p)
		if !ok || o.At != 11 {
			t.Fatalf("partition %d committed %+v, want 11 (10 records from offset 1)", p, o)
		}
	}
	var groups []map[string]any
	r, err := n.do(ctx, "GET", "/api/v1/consumer-groups", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(r.Body, []byte(`"billing"`)) {
		t.Fatalf("the consumer-group view does not show the Kafka group: %s", r.Body)
	}
	_ = groups

	// A Queen consumer sees the JSON view; the Kafka group's name is refused.
	pop, err := n.do(ctx, "GET", "/api/v1/pop/queue/orders/partition/1?batch=10&consumerGroup=queen-view&subscriptionMode=all", nil)
	if err != nil || pop.Status != 200 {
		t.Fatalf("queen pop: %v %v", err, pop)
	}
	var popped struct {
		Messages []struct {
			Data json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	pop.decode(t, &popped)
	if len(popped.Messages) != 10 || string(popped.Messages[0].Data) != `{"order":1}` {
		t.Fatalf("queen pop of partition 1: %s", pop.Body)
	}
	pop0, _ := n.do(ctx, "GET", "/api/v1/pop/queue/orders/partition/0?batch=1&consumerGroup=queen-view&subscriptionMode=all", nil)
	if !bytes.Contains(pop0.Body, []byte(`"$base64":"AAEC/wA="`)) {
		t.Fatalf("a binary value's wrapper: %s", pop0.Body)
	}
	refused, _ := n.do(ctx, "GET", "/api/v1/pop/queue/orders?batch=1&consumerGroup=billing", nil)
	if refused.Status != 409 || !bytes.Contains(refused.Body, []byte("Kafka consumer group")) {
		t.Fatalf("a Queen pop with the Kafka group's name: %v", refused)
	}
}
