// Command jepsen is queen-node's fault test: it runs real queen-node
// processes, injects faults while clients work, records every operation and
// checks the histories.
//
//	go run ./jepsen -nodes 3 -time 60s -faults kill,pause,partition -workload all
//
// -faults powerloss puts each node's data dir on a lossyfs FUSE mount
// (jepsen/lossyfs; needs root and /dev/fuse) and cuts nodes' power: what
// they did not fsync is lost, and they boot again with a new boot id.
//
// It ends with one line
//
//	jepsen: ok|FAIL ops=N faults=N lost=N duplicated=N linearizable=true|false
//
// and exits non-zero on any violation. On failure the work directory (node
// data dirs and logs) is kept and a report folder inside it holds the
// history, the faults, the violations and porcupine's visualization.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/queen-node/queen-node/jepsen/failpoint"
	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/jepsen/run"
	"github.com/queen-node/queen-node/nodeproc"
)

func main() {
	nodes := flag.Int("nodes", 3, "cluster size")
	dur := flag.Duration("time", 60*time.Second, "how long clients work while faults happen")
	faults := flag.String("faults", "kill,pause,partition", "comma list: kill, pause, partition, clock, membership, snapshot-membership, powerloss, powerloss-torn, corrupt, rolling, one-way, slow-disk, disk-full")
	workloads := flag.String("workload", "all", "comma list: queue, kv, timers, ledger, locks, streams, kafka, all")
	bin := flag.String("bin", "", "queen-node binary (default: build ./cmd/queen-node)")
	out := flag.String("out", "", "work directory (default: a new temp dir, removed when the run passes)")
	seed := flag.Int64("seed", 0, "random seed (default: from the clock)")
	netns := flag.String("netns", "auto", "network namespaces for real partitions: auto | on | off")
	lossy := flag.String("lossyfs", "auto", "data dirs on lossyfs FUSE mounts that drop unsynced writes on a power loss: auto (on with a powerloss fault) | on | off")
	verbose := flag.Bool("v", false, "log faults and node events")
	minFaults := flag.Int("min-faults", 0, "keep going past -time until this many faults were injected (at most -time again plus 30 minutes)")
	retention := flag.Duration("retention", 0, "give the queue workload's queue this completedRetentionSeconds and the nodes 500 ms retention sweeps (0 = off)")
	groups := flag.Int("groups", 1, "run the nodes with --raft-groups N")
	tenants := flag.Int("tenants", 1, "run every workload once per tenant (the default and N-1 others spread over the groups), each checked on its own")
	flag.Parse()

	dir := *out
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "queen-jepsen-")
		if err != nil {
			log.Fatal(err)
		}
		dir = d
	}
	if *bin == "" {
		b, err := nodeproc.Build(context.Background(), dir)
		if err != nil {
			log.Fatalf("jepsen: %v", err)
		}
		*bin = b
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(f string, a ...any) { log.Printf(f, a...) }
	}
	if *lossy == "on" || (*lossy == "auto" && failpoint.NeedsLossyFS(split(*faults))) {
		// The lossyfs mounts are served by this process: on a signal,
		// detach them rather than leave dead mounts in the work dir.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			s := <-sigs
			lossyfs.DetachAll()
			log.Fatalf("jepsen: %v: lossyfs mounts detached (work dir %s)", s, dir)
		}()
	}
	ctx := context.Background()
	sum, err := run.Run(ctx, run.Options{
		Nodes: *nodes, Duration: *dur, Faults: split(*faults), Workloads: split(*workloads),
		Bin: *bin, Dir: dir, Seed: *seed, NetNS: *netns, LossyFS: *lossy, Logf: logf, Retention: *retention,
		MinFaults: *minFaults, Groups: *groups, Tenants: *tenants,
	})
	if err != nil {
		fmt.Println("jepsen: FAIL ops=0 faults=0 lost=0 duplicated=0 linearizable=false")
		log.Fatalf("jepsen: %v (work dir %s)", err, dir)
	}
	if len(sum.Skipped) > 0 {
		fmt.Fprintf(os.Stderr, "jepsen: faults not available on this machine: %s\n", strings.Join(sum.Skipped, ","))
	}
	if !sum.OK {
		for _, v := range sum.Violations {
			fmt.Fprintln(os.Stderr, "  "+v)
		}
		fmt.Fprintf(os.Stderr, "jepsen: report in %s\n", sum.Report)
		fmt.Println(sum.Line())
		os.Exit(1)
	}
	if *out == "" {
		os.RemoveAll(dir)
	}
	fmt.Println(sum.Line())
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
