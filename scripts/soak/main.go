package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

type options struct {
	messages           int64
	duration           time.Duration
	sample             time.Duration
	warmup             float64
	completedRetention int
	producers          int
	consumers          int
	partitions         int
	batch              int
	backlog            int64
	payload            int
	bin                string
	out                string
	keep               bool
}

// maxDuration bounds a soak whatever -duration says.
const maxDuration = 30 * time.Minute

func main() {
	var o options
	flag.Int64Var(&o.messages, "messages", 5_000_000, "stop producing after this many messages")
	flag.DurationVar(&o.duration, "duration", maxDuration, "stop after this long (at most 30m)")
	flag.DurationVar(&o.sample, "sample", 5*time.Second, "sampling period")
	flag.Float64Var(&o.warmup, "warmup", 0.25, "fraction of the run left out of the slopes")
	flag.IntVar(&o.completedRetention, "completed-retention", 30, "the queue's completedRetentionSeconds")
	flag.IntVar(&o.producers, "producers", 4, "pushing connections")
	flag.IntVar(&o.consumers, "consumers", 6, "consuming connections")
	flag.IntVar(&o.partitions, "partitions", 16, "partitions of the queue")
	flag.IntVar(&o.batch, "batch", 100, "messages per push")
	flag.Int64Var(&o.backlog, "backlog", 100_000, "producers wait while this many pushed messages are unconsumed")
	flag.IntVar(&o.payload, "payload", 256, "payload bytes")
	flag.StringVar(&o.bin, "bin", "", "queen-node binary (default: a build of the working tree)")
	flag.StringVar(&o.out, "out", "soak-out", "where soak.csv, soak.svg and the cluster's dir go")
	flag.BoolVar(&o.keep, "keep", false, "keep the cluster's data dirs")
	flag.Parse()
	o.duration = min(o.duration, maxDuration)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &o); err != nil {
		log.Fatalf("soak: %v", err)
	}
}

func run(ctx context.Context, o *options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	dir := filepath.Join(o.out, "cluster")
	os.RemoveAll(dir)
	bin, err := nodeproc.Binary(ctx, o.bin, o.out)
	if err != nil {
		return err
	}
	cl, err := nodeproc.StartCluster(ctx, nodeproc.ClusterConfig{Bin: bin, Dir: dir, Nodes: 3,
		Flags: []string{"--retention-interval-ms", "2000", "--snapshot-threshold", "20000", "--snapshot-interval", "5s", "--kv-read-rate", "0"}})
	if err != nil {
		return err
	}
	defer func() {
		cl.Stop()
		if !o.keep {
			os.RemoveAll(dir)
		}
	}()
	w := newWorkload(o, cl.URLs())
	if err := w.configure(ctx); err != nil {
		return err
	}
	log.Printf("soak: 3 nodes up; %d messages or %v, sampling every %v", o.messages, o.duration, o.sample)

	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	var producing atomic.Int32
	for i := 0; i < o.producers; i++ {
		wg.Add(1)
		producing.Add(1)
		go func(i int) { defer wg.Done(); defer producing.Add(-1); w.produce(runCtx, i) }(i)
	}
	consumeCtx, stopConsumers := context.WithCancel(runCtx)
	defer stopConsumers()
	for i := 0; i < o.consumers; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); w.consume(consumeCtx, i) }(i)
	}
	s := newSampler(o, cl.Nodes(), w)
	start := time.Now()
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	drainUntil := time.Time{}
	var restarts []restart
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-tick.C:
			s.take(ctx, time.Since(start))
			if len(restarts) == 0 && w.pushed.Load() >= o.messages/2 {
				r, err := timeRestart(ctx, cl, fmt.Sprintf("under load at %d messages", w.pushed.Load()))
				if err != nil {
					return err
				}
				restarts = append(restarts, r)
				log.Printf("soak: %s restarted in %v", r.node, r.took)
			}
			if producing.Load() == 0 && drainUntil.IsZero() {
				drainUntil = time.Now().Add(time.Duration(o.completedRetention+10) * time.Second)
			}
			if !drainUntil.IsZero() && (w.consumed.Load() >= w.pushed.Load() && time.Now().After(drainUntil)) {
				break loop
			}
		}
	}
	stopConsumers()
	cancel()
	wg.Wait()
	s.take(ctx, time.Since(start))
	r, err := timeRestart(ctx, cl, "after the run")
	if err != nil {
		return err
	}
	rep := s.report(o, append(restarts, r), w)
	csvPath, svgPath := filepath.Join(o.out, "soak.csv"), filepath.Join(o.out, "soak.svg")
	if err := s.writeCSV(csvPath); err != nil {
		return err
	}
	if err := drawChart(s, o, svgPath); err != nil {
		return err
	}
	fmt.Print(rep)
	fmt.Printf("csv: %s\nchart: %s\n", csvPath, svgPath)
	if lost := w.missing(w.pushed.Load()); lost > 0 {
		return fmt.Errorf("%d pushed orders were never delivered", lost)
	}
	fmt.Printf("every one of the %d pushed orders was delivered\n", w.pushed.Load())
	if w.errors.Load() > 0 {
		return fmt.Errorf("%d requests failed (last: %v)", w.errors.Load(), w.lastErr.Load())
	}
	return nil
}

type restart struct {
	node, when string
	took       time.Duration
}

// timeRestart kills a follower with SIGKILL and times its restart to a
// healthy node.
func timeRestart(ctx context.Context, cl *nodeproc.Cluster, when string) (restart, error) {
	l, err := cl.WaitLeader(ctx, 30*time.Second)
	if err != nil {
		return restart{}, err
	}
	for _, n := range cl.Nodes() {
		if n == l {
			continue
		}
		if err := n.Kill(); err != nil {
			return restart{}, err
		}
		start := time.Now()
		if err := n.Start(ctx); err != nil {
			return restart{}, err
		}
		return restart{n.ID(), when, time.Since(start)}, nil
	}
	return restart{}, fmt.Errorf("no follower")
}
