package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// -vs-nats: queen-node beside NATS JetStream, in one sitting, as ratios.
//
// Each system runs as three servers on loopback. NATS runs twice: with its
// default (no fsync per write) and with sync_interval: always. queen-node
// runs the working tree's build (or -bin), and, with -before BIN, that
// binary too (the commit before a change). The figures:
//
//	push    batched push: queen-node 20 connections x 100 items per request;
//	        NATS 4 async publishers with a window of 250 unacknowledged
//	consume consume + ack of a 200k backlog: queen-node pop batch 100 + ack
//	        batch in a consumer group, 20 workers; NATS a durable pull
//	        consumer, fetch 100, an explicit ack per message, 4 workers
//	sync    one client, one message at a time, waiting for each answer
//	kv      NATS KV put (R3), one client: the fsync-always reference
//	cpu     CPU (user + system, all servers, from /proc) per pushed message
//	eo      queen-node only: the seed's exactly-once pattern, 32 workers
//	reads   queen-node only: a linearizable KV get through the leader and
//	        through a follower, alternating, while 4 producers push
//	pollers queen-node only: single pushes at -poll-rate with 0, 10 and
//	        -pollers long-polling consumers parked on the queue
//	1 node  queen-node only: push, consume, sync push and exactly-once
//	        again on a single node
//
// The message is 256 bytes in every figure.

// figures is one system's measurements.
type figures struct {
	name                 string
	pushRate, pushCPU    float64 // msg/s, µs of CPU per message
	consumeRate          float64 // msg/s
	syncP50, syncP99     float64 // ms
	syncRate             float64 // msg/s
	kvP50, kvP99         float64 // ms
	eoRate, eoP50, eoP99 float64 // exactly-once orders/s and latency (queen-node)
	eoLeaderRate         float64 // the same with every worker on the leader
	eobRate, eobP99      float64 // exactly-once in batches of 10 (OnceConsumer): orders/s, batch p99 ms
	consumeCPU           float64 // CPU µs per consumed message (pop + ack)
	inOutPerCore         float64 // messages in (push) and out (consume) per busy server core-second
	readLeader           float64 // p50 ms of a linearizable KV get through the leader
	readFollower         float64 // and through a follower
	readLeaderIdle       float64 // the same with nothing else running
	readFollowerIdle     float64
	pollNone, pollMany   float64  // push p50 ms with no and with -pollers parked pops
	pollCPUFew           float64  // CPU µs per push (and its delivery) with 10 parked pops
	pollCPUMany          float64  // and with -pollers
	one                  *figures // the single-node figures (push, consume, sync, eo)
	notes                []string
}

func runVsNats(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	work, err := os.MkdirTemp("", "qn-vs-nats.")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(work)
	bin, err := natsServerBin(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	var all []*figures
	for _, mode := range []struct {
		name   string
		always bool
	}{{"nats R3", false}, {"nats R3 always", true}} {
		dir, _ := os.MkdirTemp(work, "nats.")
		f, err := measureNats(ctx, bin, dir, mode.name, mode.always, o, stderr)
		// Its files go before the next system runs, as queen-node's own do
		// (startNodes): left in the page cache, some dirty, they would
		// make every later run pay the kernel's writeback and reclaim.
		os.RemoveAll(dir)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", mode.name, err)
			return 1
		}
		all = append(all, f)
	}
	systems := []struct{ name, bin string }{{"queen-node", o.bin}}
	if o.before != "" {
		systems = append(systems, struct{ name, bin string }{"before", o.before})
	}
	for _, s := range systems {
		f, err := measureQueen(ctx, s.name, s.bin, o, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", s.name, err)
			return 1
		}
		if f.one, err = measureQueenOne(ctx, s.name, s.bin, o, stderr); err != nil {
			fmt.Fprintf(stderr, "bench: %s, one node: %v\n", s.name, err)
			return 1
		}
		all = append(all, f)
	}
	writeComparison(stdout, all, o)
	return 0
}

func measureNats(ctx context.Context, bin, dir, name string, always bool, o *options, stderr io.Writer) (*figures, error) {
	fmt.Fprintf(stderr, "bench: %s: starting 3 nats-server %s (jetstream, file storage%s)\n", name, natsVersion,
		map[bool]string{true: ", sync_interval: always", false: ""}[always])
	c, err := startNats(ctx, bin, dir, 3, always, stderr)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	r := natsRun{urls: c.urls, payload: natsPayload(o.payload), dur: o.duration}
	nc, js, err := r.connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	f := &figures{name: name}
	if _, err := r.stream(ctx, js, "push"); err != nil {
		return nil, err
	}
	cpu := startCPU(c.pids())
	n, took, err := r.publishAsync(ctx, "push", 4, 250)
	if err != nil {
		return nil, err
	}
	f.pushRate, f.pushCPU = float64(n)/took.Seconds(), cpuPerMsg(cpu.used(), n)
	if _, err := r.stream(ctx, js, "cons"); err != nil {
		return nil, err
	}
	if err := r.fill(ctx, js, "cons", o.prefill); err != nil {
		return nil, err
	}
	n, took, err = r.consume(ctx, js, "cons", 4, 100, o.prefill)
	if err != nil {
		return nil, err
	}
	f.consumeRate = float64(n) / took.Seconds()
	if _, err := r.stream(ctx, js, "sync"); err != nil {
		return nil, err
	}
	rec, took, err := r.syncPublish(ctx, js, "sync")
	if err != nil {
		return nil, err
	}
	s := summarize([]*recorder{rec})
	f.syncP50, f.syncP99, f.syncRate = s.P50, s.P99, float64(s.Count)/took.Seconds()
	if rec, err = r.kvPut(ctx, js); err != nil {
		return nil, err
	}
	s = summarize([]*recorder{rec})
	f.kvP50, f.kvP99 = s.P50, s.P99
	return f, nil
}

// natsPayload is a JSON payload of size bytes, as queen-node's scenarios push.
func natsPayload(size int) []byte {
	return []byte(`{"d":"` + strings.Repeat("x", max(size-8, 0)) + `"}`)
}

func cpuPerMsg(cpu time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

// measureQueen starts a three-node cluster of bin and runs the matching
// scenarios against it.
func measureQueen(ctx context.Context, name, bin string, o *options, stderr io.Writer) (*figures, error) {
	qo := *o
	qo.start, qo.bin, qo.cluster = 3, bin, nil
	stop, err := startNodes(ctx, &qo, true, stderr)
	if err != nil {
		return nil, err
	}
	defer stop()
	for _, u := range qo.urls {
		if err := nodeproc.WaitHealthyURL(ctx, u, 30*time.Second); err != nil {
			return nil, err
		}
	}
	f, err := measureCore(ctx, name, &qo)
	if err != nil {
		return nil, err
	}
	r, err := runReads(ctx, &qo)
	if err != nil {
		return nil, err
	}
	f.readLeader, f.readFollower = r.Latency["leader/loaded"].P50, r.Latency["follower/loaded"].P50
	f.readLeaderIdle, f.readFollowerIdle = r.Latency["leader"].P50, r.Latency["follower"].P50
	noteErrors(f, r)
	if r, err = runPollers(ctx, &qo); err != nil {
		return nil, err
	}
	many := fmt.Sprintf("push/%dw", qo.pollers)
	f.pollNone, f.pollMany = r.Latency["push/0w"].P50, r.Latency[many].P50
	f.pollCPUFew, _ = r.Extra["push/10w_cpu_us_per_push"].(float64)
	f.pollCPUMany, _ = r.Extra[many+"_cpu_us_per_push"].(float64)
	noteErrors(f, r)
	return f, nil
}

// measureQueenOne runs push, consume, sync push and exactly-once on one
// node of bin.
func measureQueenOne(ctx context.Context, name, bin string, o *options, stderr io.Writer) (*figures, error) {
	qo := *o
	qo.start, qo.bin, qo.cluster = 1, bin, nil
	stop, err := startNodes(ctx, &qo, true, stderr)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := nodeproc.WaitHealthyURL(ctx, qo.url, 30*time.Second); err != nil {
		return nil, err
	}
	return measureCore(ctx, name, &qo)
}

// measureCore runs what both shapes measure: batched push (with the nodes'
// CPU), consume, sync push and exactly-once.
func measureCore(ctx context.Context, name string, qo *options) (*figures, error) {
	f := &figures{name: name}
	cpu := startCPU(nodePIDs(qo))
	r, err := runPushBatch(ctx, qo)
	if err != nil {
		return nil, err
	}
	pushCPU, pushed := cpu.used(), r.Messages
	f.pushRate, f.pushCPU = r.MsgPerSec, cpuPerMsg(pushCPU, r.Messages)
	noteErrors(f, r)
	cpu = startCPU(nodePIDs(qo))
	if r, err = runPopAck(ctx, qo); err != nil {
		return nil, err
	}
	f.consumeRate = r.MsgPerSec
	popCPU := cpu.used()
	prefilled, _ := r.Extra["prefilled"].(int64)           // pushed inside the same CPU window
	f.consumeCPU = cpuPerMsg(popCPU, r.Messages+prefilled) // per message pushed and consumed
	if s := (pushCPU + popCPU).Seconds(); s > 0 {
		f.inOutPerCore = float64(pushed+prefilled+r.Messages) / s
	}
	noteErrors(f, r)
	if r, err = runLatency(ctx, qo); err != nil {
		return nil, err
	}
	l := r.Latency["push"]
	f.syncP50, f.syncP99, f.syncRate = l.P50, l.P99, r.MsgPerSec
	noteErrors(f, r)
	eo := *qo
	eo.conns = 32
	if r, err = runExactlyOnce(ctx, &eo); err != nil {
		return nil, err
	}
	l = r.Latency["order"]
	f.eoRate, f.eoP50, f.eoP99 = r.MsgPerSec, l.P50, l.P99
	noteErrors(f, r)
	if r, err = runExactlyOnceBatch(ctx, &eo); err != nil {
		return nil, err
	}
	f.eobRate, f.eobP99 = r.MsgPerSec, r.Latency["batch"].P99
	noteErrors(f, r)
	if len(qo.urls) > 1 {
		l, err := leaderURL(ctx, qo.urls)
		if err != nil {
			return nil, err
		}
		la := eo
		la.urls, la.url = []string{l}, l
		if r, err = runExactlyOnce(ctx, &la); err != nil {
			return nil, err
		}
		f.eoLeaderRate = r.MsgPerSec
		noteErrors(f, r)
	}
	return f, nil
}

func noteErrors(f *figures, r *result) {
	if r.Errors > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%s: %d errors", r.Scenario, r.Errors))
	}
}

// writeComparison prints each figure of every system, with queen-node's
// ratio to each other system.
func writeComparison(w io.Writer, all []*figures, o *options) {
	fmt.Fprintf(w, `shapes (every message %d bytes of JSON, every system three servers on loopback, one sitting):
  nats: nats-server %s -js, file storage, R3 stream; "always" adds sync_interval: always
        push     4 async publishers, 250 unacknowledged each, %v
        consume  durable pull consumer, fetch 100, explicit ack per message, 4 workers, %d prefilled
        sync     1 publisher, one message at a time, %v; kv: 1 client, KV put (R3) one at a time
  queen-node: %d-node cluster and then 1 node, each from a fresh data dir
        push     %d connections x %d items per POST /api/v1/push, %v (scenario push-batch)
        consume  %d connections, pop batch 100 + batch ack, consumer group, %d prefilled (pop-ack)
        sync     1 connection, 1 item per push, %v (latency)
        eo       32 workers: pop 1 -> KV get of the marker -> transaction [ack + putIfAbsent] (exactly-once);
                 leader-aware: the same with every worker on the leader
        eo x10   32 OnceConsumers: pop 10 -> one getMany -> one transaction of 10 acks + markers (exactly-once-batch)
        reads    1 client alternating leader/follower KV gets, idle and beside 4 single pushers (reads)
        pollers  1 pusher at %.0f/s; 0, 10, %d long-polling pops parked (pollers)
  the same scenarios alone: go run ./scripts/bench -start 3 -scenario push-batch,pop-ack,latency,exactly-once,reads,pollers
`, o.payload, natsVersion, o.duration, o.prefill, o.duration, 3, o.conns, o.batch, o.duration, o.conns, o.prefill,
		o.duration, o.pollRate, o.pollers)
	var queen *figures
	for _, f := range all {
		if f.name == "queen-node" {
			queen = f
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "figure\t")
	for _, f := range all {
		fmt.Fprintf(tw, "%s\t", f.name)
	}
	for _, f := range all {
		if f != queen {
			fmt.Fprintf(tw, "queen/%s\t", f.name)
		}
	}
	fmt.Fprintln(tw)
	rows := []struct {
		label string
		get   func(*figures) float64
	}{
		{"push msg/s (batched)", func(f *figures) float64 { return f.pushRate }},
		{"push CPU µs/msg", func(f *figures) float64 { return f.pushCPU }},
		{"consume+ack msg/s", func(f *figures) float64 { return f.consumeRate }},
		{"sync push p50 ms", func(f *figures) float64 { return f.syncP50 }},
		{"sync push p99 ms", func(f *figures) float64 { return f.syncP99 }},
		{"sync push msg/s", func(f *figures) float64 { return f.syncRate }},
		{"kv put p50 ms", func(f *figures) float64 { return f.kvP50 }},
		{"kv put p99 ms", func(f *figures) float64 { return f.kvP99 }},
		{"exactly-once orders/s", func(f *figures) float64 { return f.eoRate }},
		{"exactly-once p99 ms", func(f *figures) float64 { return f.eoP99 }},
		{"exactly-once orders/s, leader-aware", func(f *figures) float64 { return f.eoLeaderRate }},
		{"exactly-once x10 orders/s", func(f *figures) float64 { return f.eobRate }},
		{"exactly-once x10 batch p99 ms", func(f *figures) float64 { return f.eobP99 }},
		{"prefill+consume CPU µs/msg", func(f *figures) float64 { return f.consumeCPU }},
		{"msgs in+out per busy core-second", func(f *figures) float64 { return f.inOutPerCore }},
		{"read p50 ms via leader, loaded", func(f *figures) float64 { return f.readLeader }},
		{"read p50 ms via follower, loaded", func(f *figures) float64 { return f.readFollower }},
		{"  follower/leader", func(f *figures) float64 { return div(f.readFollower, f.readLeader) }},
		{"read p50 ms via leader, idle", func(f *figures) float64 { return f.readLeaderIdle }},
		{"read p50 ms via follower, idle", func(f *figures) float64 { return f.readFollowerIdle }},
		{"  follower/leader", func(f *figures) float64 { return div(f.readFollowerIdle, f.readLeaderIdle) }},
		{"push p50 ms, nobody parked", func(f *figures) float64 { return f.pollNone }},
		{"push p50 ms, many parked", func(f *figures) float64 { return f.pollMany }},
		{"  many/none", func(f *figures) float64 { return div(f.pollMany, f.pollNone) }},
		{"CPU µs/push+delivery, 10 parked", func(f *figures) float64 { return f.pollCPUFew }},
		{"CPU µs/push+delivery, many parked", func(f *figures) float64 { return f.pollCPUMany }},
		{"  many/10", func(f *figures) float64 { return div(f.pollCPUMany, f.pollCPUFew) }},
		{"1 node: push msg/s", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.pushRate }) }},
		{"1 node: push CPU µs/msg", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.pushCPU }) }},
		{"1 node: consume+ack msg/s", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.consumeRate }) }},
		{"1 node: sync push p50 ms", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.syncP50 }) }},
		{"1 node: sync push p99 ms", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.syncP99 }) }},
		{"1 node: exactly-once orders/s", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.eoRate }) }},
		{"1 node: exactly-once p99 ms", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.eoP99 }) }},
		{"1 node: exactly-once x10 orders/s", func(f *figures) float64 { return f.one.get(func(o *figures) float64 { return o.eobRate }) }},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t", row.label)
		for _, f := range all {
			fmt.Fprintf(tw, "%s\t", num(row.get(f)))
		}
		for _, f := range all {
			if f == queen {
				continue
			}
			if queen == nil || row.get(f) == 0 || row.get(queen) == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%.2fx\t", row.get(queen)/row.get(f))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, f := range all {
		for _, n := range f.notes {
			fmt.Fprintf(w, "%s: %s\n", f.name, n)
		}
		if f.one != nil {
			for _, n := range f.one.notes {
				fmt.Fprintf(w, "%s, one node: %s\n", f.name, n)
			}
		}
	}
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// get reads a single-node figure; 0 (printed "-") for a system without.
func (f *figures) get(v func(*figures) float64) float64 {
	if f == nil {
		return 0
	}
	return v(f)
}

func num(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
