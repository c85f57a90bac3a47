package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/run"
	"github.com/queen-node/queen-node/nodeproc"
)

// TestShortFaultRun is the fault test's short run: three real nodes, every
// workload, kills and pauses (and partitions when network namespaces are
// available), about 25 s of load, with the queue's consumed messages
// removed by retention sweeps all along. `go run ./jepsen` runs longer ones;
// scripts/jepsen.sh runs the long campaign.
func TestShortFaultRun(t *testing.T) {
	shortRun(t, []string{"kill", "pause", "partition", "clock", "corrupt", "rolling", "snapshot-membership"}, []string{"all"}, 25*time.Second)
}

// TestShortDiskAndLinkFaultRun: the faults of a slow disk and a full one
// (on lossyfs, as root with FUSE) and of one-way links (network
// namespaces, as root); where a class cannot run here the run says so and
// the rest runs.
func TestShortDiskAndLinkFaultRun(t *testing.T) {
	shortRun(t, []string{"slow-disk", "disk-full", "one-way"}, []string{"queue", "kv"}, 15*time.Second)
}

func shortRun(t *testing.T, faults, workloads []string, load time.Duration) {
	if testing.Short() {
		t.Skip("-short: the fault run takes about a minute")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := nodeproc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	sum, err := run.Run(ctx, run.Options{
		Nodes: 3, Duration: load, Faults: faults,
		Workloads: workloads, Bin: bin, Dir: work, Logf: t.Logf, Retention: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum.Line())
	if len(sum.Skipped) > 0 {
		t.Logf("faults not available on this machine: %v", sum.Skipped)
	}
	if !sum.OK {
		for _, v := range sum.Violations {
			t.Error(v)
		}
		t.Fatalf("%s (report: %s)", sum.Line(), sum.Report)
	}
	if sum.Faults == 0 || sum.Ops < 100 {
		t.Fatalf("the run did too little to mean anything: %s", sum.Line())
	}
}
