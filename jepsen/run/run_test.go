package run

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
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
	bin := filepath.Join(dir, "queen-node")
	build := exec.Command("go", "build", "-o", bin, "github.com/queen-node/queen-node/cmd/queen-node")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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
