// Command exactly-once charges five orders exactly once through
// queen-node, with one failure and a full replay, and checks the ledger
// (examples/exactly-once/README.md). It exits 0 on PASS and 1 on FAIL.
//
//	go run ./examples/exactly-once                                   # HTTP on 127.0.0.1:6632
//	go run ./examples/exactly-once -transport grpc                   # gRPC on 127.0.0.1:6633
//	go run ./examples/exactly-once -transport grpc -url 10.0.0.5:6633
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/queen-node/queen-node/examples/exactly-once/app"
)

func main() {
	transport := flag.String("transport", "http", "http or grpc")
	url := flag.String("url", "", "the broker: http://host:port for http (default http://127.0.0.1:6632), host:port for grpc (default 127.0.0.1:6633)")
	flag.Parse()
	cfg := app.Config{URL: *url, Transport: *transport}
	if cfg.URL == "" {
		cfg.URL = "http://127.0.0.1:6632"
		if cfg.Transport == "grpc" {
			cfg.URL = "127.0.0.1:6633"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg); err != nil {
		os.Exit(1) // Run has said why
	}
}
