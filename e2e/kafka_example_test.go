package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/examples/kafka-charge-once/app"
)

// TestKafkaChargeOnceExample runs examples/kafka-charge-once (the seed's
// "charge each order once" for Kafka users: a franz-go
// GroupTransactSession whose charges and input offsets commit in one
// transaction) against the built binary's Kafka listener: a zombie that
// is fenced, a crash before the commit that leaves nothing, a resume that
// charges every order, and a restart that charges none.
func TestKafkaChargeOnceExample(t *testing.T) {
	n, addr := startKafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err := app.Run(ctx, app.Config{Seeds: []string{addr}, Orders: 50, Out: &out})
	t.Logf("ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("app.Run: %v", err)
	}
	if !strings.Contains(out.String(), "\nPASS: 10 checks\n") {
		t.Fatalf("no PASS line")
	}
	n.requireRunning()
}
