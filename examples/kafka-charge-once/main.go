// Command kafka-charge-once charges each order exactly once through
// queen-node's Kafka listener with franz-go transactions, across a zombie,
// a crash and a restart, and checks the charges topic
// (examples/kafka-charge-once/README.md). It exits 0 on PASS and 1 on
// FAIL.
//
//	go run ./examples/kafka-charge-once                        # Kafka on 127.0.0.1:9092
//	go run ./examples/kafka-charge-once -kafka 10.0.0.5:9092 -orders 200
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/queen-node/queen-node/examples/kafka-charge-once/app"
)

func main() {
	seeds := flag.String("kafka", "127.0.0.1:9092", "the broker's Kafka address (host:port; several: comma-separated)")
	orders := flag.Int("orders", 50, "orders to charge")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, app.Config{Seeds: strings.Split(*seeds, ","), Orders: *orders}); err != nil {
		os.Exit(1) // Run has said why
	}
}
