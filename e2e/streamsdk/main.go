// Command streamsdk runs a tumbling-window count with Queen's own Go stream
// SDK (third_party/queen-client-go, unchanged) against a broker, for the
// e2e test that kills it mid-window (e2e/streams_sdk_test.go): every window
// of every partition of -src is counted and its count pushed to -sink as
// {"count", "windowStart", "partition"}. It runs until SIGTERM or SIGKILL.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	queen "github.com/smartpricing/queen/clients/client-go"
	"github.com/smartpricing/queen/clients/client-go/streams"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:6632", "the broker")
	src := flag.String("src", "events", "source queue")
	sink := flag.String("sink", "counts", "sink queue")
	query := flag.String("query", "count-by-window", "the query's name")
	window := flag.Float64("window", 1, "window seconds")
	flag.Parse()

	client, err := queen.New(*url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stream := streams.From(client.Queue(*src).AsStreamSource()).
		WindowTumbling(*window, streams.WithIdleFlushMs(400)).
		Aggregate(map[string]streams.ExtractorFn{"count": func(interface{}) (float64, error) { return 1, nil }}, "count").
		Map(func(v interface{}, ec streams.EmitCtx) (interface{}, error) {
			count := 0.0
			if m, ok := v.(map[string]interface{}); ok {
				count, _ = m["count"].(float64)
			}
			return map[string]interface{}{"count": count, "windowStart": ec["windowStart"], "partition": ec["partition"]}, nil
		}).
		To(client.Queue(*sink))
	r, err := stream.Run(ctx, streams.RunOptions{QueryID: *query, URL: *url, BatchSize: 20, MaxPartitions: 1,
		SubscriptionMode: "all"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("running")
	<-ctx.Done()
	r.Stop()
	m := r.Metrics()
	fmt.Printf("stopped: cycles %d flushes %d messages %d errors %d (%s)\n", m.CyclesTotal, m.FlushCyclesTotal, m.MessagesTotal, m.ErrorsTotal, m.LastError)
}
