// Command booking-saga runs the booking saga against a queen-node broker:
// reserve (state + release timer + payment request + ack in one
// transaction), confirm (state with expect + timer cancel + ack), and a
// release handler for the bookings whose payment never came. It prints
// PASS and exits 0 when every check holds, FAIL and exits 1 otherwise.
//
//	go run ./examples/booking-saga -url http://127.0.0.1:6632
//
// See examples/booking-saga/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/examples/booking-saga/saga"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg saga.Config
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:6632", "the broker's HTTP address")
	flag.IntVar(&cfg.Bookings, "bookings", 6, "bookings to submit")
	flag.IntVar(&cfg.Declined, "declined", 2, "bookings whose payment is declined (released by their timer)")
	flag.IntVar(&cfg.Late, "late", 1, "bookings paid only after their release timer fired")
	flag.IntVar(&cfg.Duplicates, "duplicates", 2, "bookings submitted a second time")
	flag.DurationVar(&cfg.ReleaseDelay, "release-delay", 1500*time.Millisecond, "delay of each release timer")
	flag.DurationVar(&cfg.Timeout, "timeout", 60*time.Second, "deadline of the whole run")
	flag.StringVar(&cfg.RunID, "run", "", "run id naming the queues and the KV namespace (default: from the clock)")
	flag.BoolVar(&cfg.Keep, "keep", false, "leave the queues and the booking states behind")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "booking-saga: unexpected argument %q\n", flag.Arg(0))
		return 2
	}
	// On the command line 0 means none (in saga.Config, 0 means the default).
	for _, v := range []*int{&cfg.Declined, &cfg.Late, &cfg.Duplicates} {
		if *v == 0 {
			*v = -1
		}
	}
	cfg.Log = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Printf("broker %s\n", cfg.URL)
	rep, err := saga.Run(ctx, cfg)
	if len(rep.Bookings) > 0 {
		fmt.Println()
		rep.Print(os.Stdout)
	}
	if err != nil {
		fmt.Printf("\nFAIL: %v\n", err)
		return 1
	}
	fmt.Printf("\nPASS: %d checks in %s\n", rep.Passed(), rep.Elapsed.Round(time.Millisecond))
	return 0
}
