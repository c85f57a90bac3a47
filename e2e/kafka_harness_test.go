package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-node/queen-node/nodeproc"
)

// startKafkaNode starts a single node with its Kafka listener on.
func startKafkaNode(t testing.TB, extra ...string) (*node, string) {
	t.Helper()
	n := startNode(t, nodeOpts{DefaultSubscriptionMode: "all", Kafka: true, Extra: extra})
	return n, n.Addrs().Kafka
}

// startKafkaCluster starts three nodes with their Kafka listeners on.
func startKafkaCluster(t testing.TB, extra ...string) *testCluster {
	t.Helper()
	return startCluster(t, nodeOpts{DefaultSubscriptionMode: "all", Extra: extra,
		Node: func(_ int, s *nodeproc.Spec) error { s.Kafka = true; return nil }})
}

// kafkaSeeds are the Kafka addresses of the cluster's nodes.
func (c *testCluster) kafkaSeeds() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addrs().Kafka)
	}
	return out
}

// kafkaClient is a franz-go client of the brokers, closed with the test.
func kafkaClient(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic makes a topic of width partitions through the admin API.
func createTopic(t testing.TB, cl *kgo.Client, topic string, width int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, width, -1, nil, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, res.Err)
	}
}
