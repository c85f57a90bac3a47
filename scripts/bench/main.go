// Command bench is a load generator for queen-node's Queen MQ HTTP API
// (spec §4.2 push, §4.3 pop, §4.4 ack). It drives one running node over
// keep-alive HTTP connections, checks every response, counts failures apart
// from throughput, and prints a compact table (and, with -json, one JSON
// object per scenario).
//
// Each scenario answers one question:
//
//	push-batch   How many messages/s can producers write when each request
//	             carries 100 items spread over 16 partitions, and what does
//	             one such request cost?
//	push-single  Same with 1 item per request: what is the per-request
//	             (per Raft entry) ceiling when producers do not batch?
//	pop-ack      How fast can 20 consumers of one group drain a backlog
//	             spread over 32 partitions with pop(batch=100) + ack/batch,
//	             and what does each of pop and ack cost?
//	latency      What latency does a lone producer see for one push at a
//	             time, i.e. the commit floor of an idle node (p50..max)?
//	rss          How much memory (VmRSS, RssAnon, RssFile) and disk does the
//	             node hold for N pending, never-consumed messages?
//	             Off in "all" unless -rss-messages is given.
//
// Usage:
//
//	go run ./scripts/bench -url http://127.0.0.1:6632 [-scenario all|name,...]
//	    [-duration 10s] [-conns 20] [-payload 256] [-json]
//	    [-rss-messages N -pid PID -data-dir DIR]
//
// scripts/bench.sh builds the broker, starts a throwaway node and runs this
// program against it. The exit status is 1 when a scenario failed or any
// request or item failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings shared by all scenarios.
type options struct {
	url            string
	duration       time.Duration
	conns          int
	payload        int
	batch          int
	timeout        time.Duration
	jsonOut        bool
	prefill        int
	prefillTimeout time.Duration
	rssMessages    int
	rssTimeout     time.Duration
	pid            int
	dataDir        string
}

// scenario is one named benchmark.
type scenario struct {
	name string
	run  func(ctx context.Context, o *options) (*result, error)
}

var scenarios = []scenario{
	{"push-batch", runPushBatch},
	{"push-single", runPushSingle},
	{"pop-ack", runPopAck},
	{"latency", runLatency},
	{"rss", runRSS},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, names, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := waitHealthy(ctx, o.url, 15*time.Second); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	table := stdout
	if o.jsonOut {
		table = stderr // keep stdout machine-readable
	}
	failed := false
	var results []*result
	for _, s := range scenarios {
		if !names[s.name] || ctx.Err() != nil {
			continue
		}
		fmt.Fprintf(stderr, "bench: running %s ...\n", s.name)
		r, err := s.run(ctx, o)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", s.name, err)
			failed = true
		}
		if r == nil {
			continue
		}
		if r.Errors > 0 {
			failed = true
		}
		results = append(results, r)
		if o.jsonOut {
			writeJSON(stdout, r)
		}
	}
	writeTable(table, results)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted")
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*options, map[string]bool, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.url, "url", "http://127.0.0.1:6632", "base URL of the node")
	sc := fs.String("scenario", "all", "all, or a comma-separated list of: push-batch, push-single, pop-ack, latency, rss")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "run time of each timed scenario")
	fs.IntVar(&o.conns, "conns", 20, "concurrent keep-alive connections")
	fs.IntVar(&o.payload, "payload", 256, "size in bytes of each message's JSON payload {\"d\":\"...\"}")
	fs.IntVar(&o.batch, "batch", 100, "items per request in push-batch")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object per scenario on stdout (the table goes to stderr)")
	fs.IntVar(&o.prefill, "prefill", 200000, "messages pushed before pop-ack starts")
	fs.DurationVar(&o.prefillTimeout, "prefill-timeout", 60*time.Second, "cap on the pop-ack prefill time")
	fs.IntVar(&o.rssMessages, "rss-messages", 0, "messages pushed by rss; > 0 also adds rss to \"all\" (default 1000000 when -scenario rss)")
	fs.DurationVar(&o.rssTimeout, "rss-timeout", 10*time.Minute, "cap on the rss push time")
	fs.IntVar(&o.pid, "pid", 0, "PID of the node, for rss to read /proc/PID/status")
	fs.StringVar(&o.dataDir, "data-dir", "", "data dir of the node, for rss to measure")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.conns < 1 || o.batch < 1 || o.payload < 9 || o.duration <= 0 || o.prefill < 1 {
		return nil, nil, errors.New("-conns, -batch, -prefill must be >= 1, -payload >= 9, -duration > 0")
	}
	o.url = strings.TrimRight(o.url, "/")
	names, err := selectScenarios(*sc, o.rssMessages > 0)
	if err != nil {
		return nil, nil, err
	}
	if names["rss"] && o.rssMessages <= 0 {
		o.rssMessages = 1000000
	}
	return o, names, nil
}

// selectScenarios turns -scenario into a set; "all" leaves rss out unless
// withRSS.
func selectScenarios(spec string, withRSS bool) (map[string]bool, error) {
	names := map[string]bool{}
	for _, n := range strings.Split(spec, ",") {
		n = strings.TrimSpace(n)
		if n == "all" {
			for _, s := range scenarios {
				names[s.name] = s.name != "rss" || withRSS
			}
			continue
		}
		known := false
		for _, s := range scenarios {
			known = known || s.name == n
		}
		if !known {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
		names[n] = true
	}
	return names, nil
}

// waitHealthy polls GET /health until it answers 200 or limit passes.
func waitHealthy(ctx context.Context, base string, limit time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := hc.Get(base + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/health not healthy after %v: %v", base, limit, err)
		}
		if !pause(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}
