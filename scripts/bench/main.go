// Command bench is a load generator for queen-node's Queen MQ HTTP API
// (spec §4.2 push, §4.3 pop, §4.4 ack, §4.5 transaction, §4.7 KV; addendum
// §2 timers). It drives one running node, or a cluster through -urls, over
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
//	exactly-once How many orders/s can 32 charge-once consumers settle, each
//	             order being pop(batch=1) -> KV get of the order's marker ->
//	             one transaction [ack under the lease + required putIfAbsent
//	             of the marker], and what does an order and each step cost?
//	             The marker get is a KV read outside a transaction: start
//	             the node with --kv-read-rate 0 (bench.sh does).
//	exactly-once-batch
//	             The same in batches of 10 through the Go client's
//	             OnceConsumer: pop(batch=10) -> one KV getMany of the 10
//	             markers -> one transaction of the 10 acks, each with its
//	             required putIfAbsent marker. How many orders/s, and what
//	             does a batch and each step cost?
//	timers       How many timers/s can producers schedule through POST
//	             /api/v1/timers (-timer-batch ops a call, delayMs spread
//	             0..-timer-max-delay) at -timer-rate, how many fire per
//	             second, and how late does a fired message come (its
//	             createdAt minus the deliverAt its schedule returned)? The
//	             node's queen_timers_lateness_seconds is printed alongside.
//	reads        What does one linearizable KV get cost through the leader,
//	             and what through a follower (one client, nothing else
//	             running)?
//	pollers      With one producer pushing single messages at -poll-rate,
//	             what do push latency and node CPU per push become with 10
//	             and with -pollers long-polling consumers parked on the
//	             queue, against nobody waiting?
//	failover     Cluster only (-start 3): with single pushes at a steady
//	             rate through a follower, how long after a kill -9 of the
//	             leader does the first push succeed again, and when does a
//	             new leader show in /api/v1/system/cluster?
//	             -failover-rounds times, restarting the killed node between.
//	             Off in "all" unless bench started three or more nodes.
//	scaleout     alone: two three-node clusters of its own, each node in a
//	             capped cgroup, --raft-groups 1 then 3, three tenants
//	             pushing and running the exactly-once pattern: the
//	             ratio of the rates beside its ceiling 3L/(L+2F)
//	             (scaleout.go). Never in "all".
//	kafka        -start only: node CPU per message of produce (batched,
//	             acks=all) and consume through the Kafka listener beside
//	             the same through HTTP, in one sitting, and their ratio.
//	rss          How much memory (VmRSS, RssAnon, RssFile) and disk does the
//	             node hold for N pending, never-consumed messages?
//	             Off in "all" unless -rss-messages is given.
//
// Usage:
//
//	go run ./scripts/bench -start 1|3 [-bin PATH] [-node-args "--flag v ..."] [-keep-data]
//	go run ./scripts/bench -url http://127.0.0.1:6632 | -urls URL,URL,...
//	    [-scenario all|name,...] [-duration 10s] [-conns 20] [-payload 256] [-json]
//	    [-orders N] [-timer-rate R -timer-batch B -timer-max-delay D]
//	    [-failover-rounds N] [-rss-messages N -pid PID -data-dir DIR]
//
// With -start N, bench starts N throwaway nodes itself (nodeproc: free
// loopback ports, a temp dir, joined over gossip when N > 1) from -bin, or
// $QN_BIN, or a build of the working tree; it stops them at the end and
// fails when one of them died. With -url/-urls it drives nodes that are
// already running. Worker w of every scenario talks to node (URL) w mod N.
// scripts/bench.sh builds this program and runs it with -start 1 (or, with
// -cluster, -start 3). The exit status is 1 when a scenario failed, any
// request or item failed, or a node bench started died.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
	"github.com/queen-node/queen-node/nodeproc"
)

// options are the command-line settings shared by all scenarios.
type options struct {
	url            string   // the first of urls
	urls           []string // every node the workers talk to
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

	orders int // exactly-once prefill

	timerRate     float64
	timerBatch    int
	timerMaxDelay time.Duration

	start    int    // nodes to start (0: drive -url/-urls)
	bin      string // their binary ("" = $QN_BIN or a build of the working tree)
	nodeArgs string // extra flags for every node started
	vsNats   bool   // the comparison with NATS JetStream (vsnats.go)
	// leaderAware sends every worker to the leader (found from the nodes'
	// /health) instead of spreading them over the nodes: what a client that
	// can learn the leader does (the Go client given every node).
	leaderAware bool
	stages      bool          // the per-stage CPU budgets (stages.go)
	before      string        // with -vs-nats: a binary of the commit before, run too
	keepData    bool          // keep the started nodes' dir
	scaleCap    float64       // scaleout: each node's CPU cap, in cores
	scaleRouted bool          // scaleout: clients route to their tenant's group leader
	scaleRounds int           // scaleout: rounds of both runs (ABBA order)
	scaleWarmup time.Duration // scaleout: untimed load before each phase
	scaleProcs  int           // scaleout: the nodes' GOMAXPROCS (0: the Go runtime's default)
	secure      bool          // with -start: TLS on every link and JWT on (secure.go)
	profileDir  string        // scaleout: CPU profiles of every node per phase (profile.go)
	traceFor    time.Duration // scaleout: with profileDir, an execution trace of every node per phase, this long

	cluster *nodeproc.Cluster // the nodes bench started (nil with -url/-urls)
	// faulty: the nodes were started by jepsen's harness (lossyfs disks,
	// network namespaces) for failover's slow-disk and deaf faults
	faulty *harness.Cluster

	pollers  int     // long-polling pops parked in pollers
	pollRate float64 // pushes per second in pollers

	failoverRounds  int
	failoverFaults  []string
	failoverRate    float64
	failoverTimeout time.Duration
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
	{"exactly-once", runExactlyOnce},
	{"exactly-once-batch", runExactlyOnceBatch},
	{"timers", runTimers},
	{"reads", runReads},
	{"pollers", runPollers},
	{"rss", runRSS},
	{"kafka", runKafka},
	{"failover", runFailover}, // last: it kills nodes
	{"scaleout", nil},         // alone: it starts clusters of its own (runScaleout)
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
	if o.stages {
		return runStages(ctx, stdout, stderr)
	}
	if o.vsNats {
		return runVsNats(ctx, o, stdout, stderr)
	}
	if names["scaleout"] {
		if n := len(slices.DeleteFunc(slices.Collect(maps.Values(names)), func(on bool) bool { return !on })); n > 1 {
			fmt.Fprintln(stderr, "bench: scaleout starts clusters of its own: run it alone")
			return 2
		}
		return runScaleout(ctx, o, stdout, stderr)
	}
	if o.start > 0 {
		stopNodes, err := startNodes(ctx, o, names["exactly-once"] || names["exactly-once-batch"] || names["reads"], stderr)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer stopNodes()
	}
	for _, u := range o.urls {
		if err := nodeproc.WaitHealthyURL(ctx, u, 15*time.Second); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if o.leaderAware {
		l, err := leaderURL(ctx, o.urls)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		fmt.Fprintf(stderr, "bench: -leader-aware: every worker talks to the leader, %s\n", l)
		o.urls, o.url = []string{l}, l
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
	if o.cluster != nil && !checkNodes(o.cluster, stderr) {
		failed = true
	}
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
	fs.StringVar(&o.url, "url", "http://127.0.0.1:6632", "base URL of a running node")
	urls := fs.String("urls", "", "comma-separated base URLs of a running cluster's nodes (overrides -url); worker w uses URL w mod n")
	fs.IntVar(&o.start, "start", 0, "start this many throwaway nodes (joined over gossip when > 1) instead of using -url/-urls")
	fs.StringVar(&o.bin, "bin", "", "with -start: the queen-node binary (default: $QN_BIN, else a build of the working tree)")
	fs.StringVar(&o.nodeArgs, "node-args", os.Getenv("QN_NODE_ARGS"), "with -start: extra flags for every node, space-separated (default: $QN_NODE_ARGS)")
	fs.BoolVar(&o.stages, "stages", false, "run the per-stage CPU benchmarks (go test -bench on the real stores) and print each beside its budget; run from the repository root")
	fs.BoolVar(&o.leaderAware, "leader-aware", false, "send every worker to the leader (found from the nodes' /health) instead of spreading them over the nodes")
	fs.BoolVar(&o.vsNats, "vs-nats", false, "compare a three-node queen-node cluster with three-node NATS JetStream (default and sync_interval: always) in one sitting, as ratios")
	fs.StringVar(&o.before, "before", "", "with -vs-nats: also measure this queen-node binary (a build of the commit before)")
	fs.BoolVar(&o.secure, "secure", false, "with -start: run the nodes with every link encrypted (HTTPS, TLS gRPC, peer mTLS, gossip keyring) and JWT on, and send an admin token")
	fs.BoolVar(&o.keepData, "keep-data", os.Getenv("KEEP_DATA") == "1", "with -start: keep the nodes' data and logs (default: $KEEP_DATA=1)")
	sc := fs.String("scenario", "all", "all, or a comma-separated list of: "+scenarioNames())
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "run time of each timed scenario")
	fs.IntVar(&o.conns, "conns", 20, "concurrent keep-alive connections")
	fs.Float64Var(&o.scaleCap, "scaleout-cap", 0.3, "scaleout: each node's CPU cap in cores (its own cgroup); the caps, the load generator and the kernel's own threads must leave the machine headroom, or the nodes contend beyond their caps (the report's machine column)")
	fs.IntVar(&o.scaleRounds, "scaleout-rounds", 2, "scaleout: rounds of both runs, each on fresh nodes, in the order 1 3, 3 1, 1 3, ...; the ratio is of the rates summed over the rounds")
	fs.DurationVar(&o.scaleWarmup, "scaleout-warmup", 5*time.Second, "scaleout: the same load, not measured, before each phase (a fresh node's first seconds grow its heap, files and caches)")
	fs.IntVar(&o.scaleProcs, "scaleout-gomaxprocs", 0, "scaleout: the nodes' GOMAXPROCS (0: the runtime's default, which is at least 2 however low the cap)")
	fs.BoolVar(&o.scaleRouted, "scaleout-routed", true, "scaleout: each client sends to its tenant's group leader (false: workers spread over the nodes, followers forward)")
	fs.StringVar(&o.profileDir, "profile", "", "scaleout: write every node's CPU profile of each phase to this directory (turns on the nodes' --pprof)")
	fs.DurationVar(&o.traceFor, "trace", 0, "scaleout, with -profile: also take every node's execution trace (go tool trace) this long from the middle of each phase")
	fs.IntVar(&o.payload, "payload", 256, "size in bytes of each message's JSON payload {\"d\":\"...\"}")
	fs.IntVar(&o.batch, "batch", 100, "items per request in push-batch")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.StringVar(&bearer, "token", os.Getenv("QN_TOKEN"), "a JWT sent on every request, for nodes with JWT on (default: $QN_TOKEN)")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object per scenario on stdout (the table goes to stderr)")
	fs.IntVar(&o.prefill, "prefill", 200000, "messages pushed before pop-ack starts")
	fs.DurationVar(&o.prefillTimeout, "prefill-timeout", 60*time.Second, "cap on the pop-ack prefill time")
	fs.IntVar(&o.rssMessages, "rss-messages", 0, "messages pushed by rss; > 0 also adds rss to \"all\" (default 1000000 when -scenario rss)")
	fs.DurationVar(&o.rssTimeout, "rss-timeout", 10*time.Minute, "cap on the rss push time")
	fs.IntVar(&o.pid, "pid", 0, "PID of the node, for rss to read /proc/PID/status (set by -start 1)")
	fs.StringVar(&o.dataDir, "data-dir", "", "data dir of the node, for rss to measure (set by -start 1)")
	fs.IntVar(&o.orders, "orders", 40000, "orders prefilled for exactly-once (the run stops early when all are settled)")
	fs.Float64Var(&o.timerRate, "timer-rate", 2000, "timers scheduled per second in timers (0 = as fast as the node answers)")
	fs.IntVar(&o.timerBatch, "timer-batch", 50, "timer ops per POST /api/v1/timers (at most 256)")
	fs.DurationVar(&o.timerMaxDelay, "timer-max-delay", 2*time.Second, "timers get a delayMs spread uniformly over 0..this")
	fs.IntVar(&o.pollers, "pollers", 1000, "long-polling pops parked on the queue in pollers' last phase")
	fs.Float64Var(&o.pollRate, "poll-rate", 200, "single pushes per second in pollers")
	fs.IntVar(&o.failoverRounds, "failover-rounds", 3, "rounds of each -failover-faults in failover")
	fs.Func("failover-faults", "comma list of what failover does to the leader each round: kill (SIGKILL), term (SIGTERM), "+
		"slow-disk (its fsyncs 300 ms late), deaf (it hears nobody); default kill,term. slow-disk and deaf start the nodes on lossyfs "+
		"in network namespaces (jepsen/harness: root, FUSE), every round on them", func(v string) error {
		o.failoverFaults = nil
		for _, f := range strings.Split(v, ",") {
			switch f = strings.TrimSpace(f); f {
			case "kill", "term", "slow-disk", "deaf":
				o.failoverFaults = append(o.failoverFaults, f)
			case "":
			default:
				return fmt.Errorf("unknown failover fault %q (kill, term, slow-disk, deaf)", f)
			}
		}
		return nil
	})
	fs.Float64Var(&o.failoverRate, "failover-rate", 50, "single pushes per second through a follower in failover")
	fs.DurationVar(&o.failoverTimeout, "failover-timeout", 30*time.Second, "cap on each failover round's wait for a new leader and a successful push")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.scaleRounds < 1 {
		return nil, nil, errors.New("-scaleout-rounds must be >= 1")
	}
	if o.conns < 1 || o.batch < 1 || o.payload < 9 || o.duration <= 0 || o.prefill < 1 || o.orders < 1 {
		return nil, nil, errors.New("-conns, -batch, -prefill, -orders must be >= 1, -payload >= 9, -duration > 0")
	}
	if o.timerBatch < 1 || o.timerBatch > 256 || o.timerRate < 0 || o.timerMaxDelay < 0 {
		return nil, nil, errors.New("-timer-batch must be 1..256, -timer-rate and -timer-max-delay >= 0")
	}
	if o.pollers < 1 || o.pollRate <= 0 {
		return nil, nil, errors.New("-pollers must be >= 1 and -poll-rate > 0")
	}
	if o.failoverRounds < 1 || o.failoverRate <= 0 || o.failoverTimeout <= 0 {
		return nil, nil, errors.New("-failover-rounds must be >= 1, -failover-rate and -failover-timeout > 0")
	}
	if o.secure && o.start == 0 {
		return nil, nil, errors.New("-secure needs -start (bench makes the certificates and the token)")
	}
	if o.start < 0 || (o.start > 0 && *urls != "") {
		return nil, nil, errors.New("-start must be >= 0, and -start and -urls do not go together")
	}
	o.urls = splitList(*urls)
	if len(o.urls) == 0 {
		o.urls = []string{o.url}
	}
	for i, u := range o.urls {
		o.urls[i] = strings.TrimRight(u, "/")
	}
	o.url = o.urls[0]
	names, err := selectScenarios(*sc, o.rssMessages > 0, o.start >= 3, o.start > 0)
	if err != nil {
		return nil, nil, err
	}
	if names["rss"] && o.rssMessages <= 0 {
		o.rssMessages = 1000000
	}
	return o, names, nil
}

func scenarioNames() string {
	ns := make([]string, len(scenarios))
	for i, s := range scenarios {
		ns[i] = s.name
	}
	return strings.Join(ns, ", ")
}

// splitList is the non-empty trimmed elements of a comma list.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// selectScenarios turns -scenario into a set; "all" leaves rss out unless
// withRSS, failover out unless withFailover (a cluster bench started), and
// kafka out unless withKafka (nodes bench started).
func selectScenarios(spec string, withRSS, withFailover, withKafka bool) (map[string]bool, error) {
	names := map[string]bool{}
	for _, n := range strings.Split(spec, ",") {
		n = strings.TrimSpace(n)
		if n == "all" {
			for _, s := range scenarios {
				on := true
				switch s.name {
				case "rss":
					on = withRSS
				case "failover":
					on = withFailover
				case "kafka":
					on = withKafka
				case "scaleout":
					on = false
				}
				names[s.name] = names[s.name] || on
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
