package run

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/nodeproc"
)

// TestShortPowerLossRun is a short fault run whose only fault is a power
// loss (of one node, or of all of them at once): the data dirs are on
// lossyfs, every write a node did not fsync is lost, and the node boots
// again with a new boot id. Every acknowledged write must survive.
func TestShortPowerLossRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault run takes about a minute")
	}
	if ok, why := lossyfs.Available(); !ok {
		t.Skipf("lossyfs cannot be mounted on this machine, so power loss cannot be simulated: %s", why)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := nodeproc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	sum, err := Run(ctx, Options{
		Nodes: 3, Duration: 20 * time.Second, Faults: []string{"powerloss"},
		Workloads: []string{"queue", "ledger"}, Bin: bin, Dir: work, Seed: 7, Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum.Line())
	if len(sum.Skipped) > 0 {
		t.Fatalf("faults skipped although lossyfs is available: %v", sum.Skipped)
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
