package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg Config
	var keep bool
	flag.IntVar(&cfg.N, "n", 0, "requests to send (0 = bounded by -duration only)")
	flag.DurationVar(&cfg.Duration, "duration", 0, "time to fuzz (0 = bounded by -n only; without either, 60s)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the request stream (0 = from the clock; the run prints it)")
	flag.StringVar(&cfg.Bin, "bin", "", "queen-node binary (default: $QN_BIN, else a fresh go build)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the node's data, log and failing bodies (default: a temporary one, removed after a clean run)")
	flag.IntVar(&cfg.MaxChecks, "max-checks", 0, "at most this many 4xx answers compared for writes (0 = every candidate)")
	flag.IntVar(&cfg.ReadSample, "read-sample", 8, "one in this many requests that cannot write is a candidate for the write check too")
	flag.IntVar(&cfg.MaxBody, "max-body", 256<<10, "the node's --max-body-bytes (small, so that 413 is reachable)")
	flag.Func("known", "a finding already reported, as kind@route (e.g. 'write on a 4xx@POST /api/v1/push'): printed once, counted, not a failure (repeatable)", func(v string) error {
		cfg.Known = append(cfg.Known, v)
		return nil
	})
	flag.BoolVar(&cfg.Verbose, "v", false, "print every request and its answer")
	flag.BoolVar(&keep, "keep", false, "keep the node's data dir and log after a clean run")
	flag.Parse()
	if cfg.N == 0 && cfg.Duration == 0 {
		cfg.Duration = 60 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	cfg.Out = os.Stdout
	tmp := cfg.Dir == ""
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(rep.Summary())
	fmt.Println(rep.Details())
	if len(rep.Failures) > 0 {
		fmt.Printf("fuzzhttp: FAILED; the node's data dir and log are kept in %s (log %s); replay a run with -seed %d -n %d\n",
			rep.Dir, rep.NodeLog, rep.Seed, rep.Sent)
		os.Exit(1)
	}
	if tmp && !keep {
		os.RemoveAll(rep.Dir)
	}
}
