package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
	"github.com/queen-node/queen-node/jepsen/netns"
)

// TestLossyDiskInNamespace checks what the power-loss fault relies on when
// nodes run in network namespaces: the node's lossyfs mount is visible
// inside its namespace (`ip netns exec` gives the process a copy of the
// mount table), its writes go through lossyfs, a power loss drops what it
// did not fsync, and the power loss really ends the filesystem even while
// processes in namespaces hold copies of the mount.
func TestLossyDiskInNamespace(t *testing.T) {
	if ok, why := lossyfs.Available(); !ok {
		t.Skipf("lossyfs cannot be mounted here: %s", why)
	}
	if ok, why := netns.Available(); !ok {
		t.Skipf("network namespaces unavailable: %s", why)
	}
	nt, err := netns.New(2)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	dir := t.TempDir()
	c := &Cluster{opts: Options{LossyFS: true, Logf: t.Logf}, net: nt, run: "test"}
	n := &Node{Index: 1, id: "n1", dir: filepath.Join(dir, "n1")}
	if err := c.mountDisk(n); err != nil { // checks visibility in the namespace
		t.Fatal(err)
	}
	defer func() {
		if n.disk != nil {
			n.disk.Unmount()
		}
	}()
	// Another node's namespace made after the mount holds a copy of it.
	other := nt.Command(2, "sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()

	// A process in n1's namespace writes one file with fsync and one
	// without.
	synced := filepath.Join(n.dir, "synced")
	lazy := filepath.Join(n.dir, "lazy")
	script := "printf durable > " + synced + " && sync " + synced + " && printf volatile > " + lazy
	if out, err := nt.Command(1, "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("writing inside the namespace: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(n.Backing, "lazy")); len(b) != 0 {
		t.Fatalf("an unsynced write reached the disk: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(n.Backing, "synced")); string(b) != "durable" {
		t.Fatalf("the fsynced write did not reach the disk: %q", b)
	}
	disk := n.disk
	start := time.Now()
	loss, err := c.dropDisk(n, PowerLossMode{})
	if err != nil {
		t.Fatal(err)
	}
	if !disk.Stopped() {
		t.Errorf("the old filesystem still serves after the power loss (a copy of the mount in another namespace kept it)")
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("the power loss took %v", time.Since(start))
	}
	if loss.PerFile["lazy"] != 1 {
		t.Fatalf("loss = %v, want the page of lazy", loss)
	}
	if n.BootID() != "jepsen-test-n1-boot1" {
		t.Fatalf("boot id after the power loss: %q", n.BootID())
	}
	for name, want := range map[string]string{"synced": "durable", "lazy": ""} {
		out, err := nt.Command(1, "cat", filepath.Join(n.dir, name)).Output()
		if err != nil || string(out) != want {
			t.Fatalf("after the power loss %s reads %q (%v), want %q", name, out, err, want)
		}
	}
}
