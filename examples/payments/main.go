// Command payments runs the payments lab against a queen-node broker: the
// same 1000 payments and the same crashes, charged three ways (charge then
// ack, ack then charge, and marker + ack + charge in one transaction), and
// prints the three-way scoreboard.
//
//	go run ./examples/payments -url http://127.0.0.1:6632
//
// See examples/payments/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/examples/payments/lab"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg lab.Config
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:6632", "the broker's HTTP address")
	flag.IntVar(&cfg.Payments, "payments", 1000, "payments to charge in each mode")
	flag.IntVar(&cfg.Amount, "amount", 100, "amount of each payment")
	flag.IntVar(&cfg.Workers, "workers", 8, "concurrent workers in each mode")
	flag.IntVar(&cfg.Partitions, "partitions", 0, "partitions of each payments queue (default 2 × workers)")
	flag.IntVar(&cfg.Batch, "batch", 10, "payments per batch in mode 4 (the Go client's OnceConsumer)")
	flag.IntVar(&cfg.LeaseSeconds, "lease", 1, "the queues' leaseTime in seconds: how long a crashed delivery waits to come back")
	flag.IntVar(&cfg.CrashPercent, "crash-percent", 10, "share of deliveries the crash plan kills")
	flag.Float64Var(&cfg.KVReadRate, "kv-rate", 150, "marker reads per second in mode 3, below the broker's KV read rate (-1 = unpaced)")
	flag.DurationVar(&cfg.ModeTimeout, "timeout", 3*time.Minute, "deadline of each mode")
	quiet := flag.Bool("quiet", false, "print only the scoreboard, no progress lines")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "payments: unexpected argument %q\n", flag.Arg(0))
		return 2
	}
	if !*quiet {
		cfg.Log = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Printf("broker %s\n\n", cfg.URL)
	sb, err := lab.Run(ctx, cfg)
	sb.Print(os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nFAIL: %v\n", err)
		return 1
	}
	if err := sb.Check(); err != nil {
		fmt.Printf("\nFAIL: %v\n", err)
		return 1
	}
	fmt.Println("\nPASS: duplicates without the marker, losses with ack first, neither with the marker transaction, one at a time or in batches")
	return 0
}
