package harness

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/lossyfs"
)

// mountDisk puts n's data dir on a lossyfs mount of its own, and checks
// that the node will see it: a node in a network namespace runs under `ip
// netns exec`, which gives it a copy of the mount table, and a node writing
// to the bare mountpoint instead would make every power loss a no-op.
func (c *Cluster) mountDisk(n *Node) error {
	n.Backing = n.dir + ".disk"
	for _, d := range []string{n.Backing, n.dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
	}
	disk, err := lossyfs.Mount(n.Backing, n.dir, nil)
	if err != nil {
		return fmt.Errorf("harness: %s: %w", n.id, err)
	}
	n.disk = disk
	if n.bootID == "" {
		n.bootID = fmt.Sprintf("jepsen-%s-%s-boot%d", c.run, n.id, n.boots)
	}
	if err := c.checkDisk(n); err != nil {
		n.disk = nil
		disk.Unmount()
		return err
	}
	return nil
}

// checkDisk writes a token through n's mount and reads it back the way the
// node's process will see the file system (inside its namespace).
func (c *Cluster) checkDisk(n *Node) error {
	token := []byte(fmt.Sprintf("lossyfs %s %d\n", n.id, rand.Int63()))
	probe := filepath.Join(n.dir, ".lossyfs-probe")
	if err := os.WriteFile(probe, token, 0o644); err != nil {
		return fmt.Errorf("harness: %s: write through lossyfs: %w", n.id, err)
	}
	defer os.Remove(probe)
	if b, err := os.ReadFile(filepath.Join(n.Backing, ".lossyfs-probe")); err != nil || len(b) != 0 {
		return fmt.Errorf("harness: %s: an unsynced write reached the backing disk (%q, %v): lossyfs is not in the way", n.id, b, err)
	}
	if c.net == nil {
		return nil
	}
	out, err := c.net.Command(n.Index, "cat", probe).Output()
	if err != nil || !bytes.Equal(out, token) {
		return fmt.Errorf("harness: %s: the lossyfs mount is not visible inside the node's network namespace (read %q, %v)", n.id, out, err)
	}
	return nil
}

// PowerLossMode says what reaches the disk when the power goes.
type PowerLossMode struct {
	// Torn keeps each unsynced page with probability Keep (drawn from
	// Rng): a disk that wrote back part of the page cache, in no order.
	// Otherwise every unsynced write is lost.
	Torn bool
	Keep float64
	Rng  *rand.Rand
}

func (m PowerLossMode) String() string {
	if m.Torn {
		return fmt.Sprintf("torn: %.0f%% of unsynced pages reach the disk", m.Keep*100)
	}
	return "every unsynced write lost"
}

// PowerOff cuts the power of the given nodes at once: SIGKILL to every
// one, then each machine's unsynced writes are thrown away (lossyfs) and
// its disk is mounted afresh. The nodes stay down; the next Restart boots
// them with a new QUEEN_TEST_BOOT_ID. It returns what each node lost.
func (c *Cluster) PowerOff(nodes []*Node, mode PowerLossMode) (map[string]lossyfs.Loss, error) {
	if !c.opts.LossyFS {
		return nil, errors.New("harness: power loss needs the data dirs on lossyfs")
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			if err := n.Kill(); err != nil {
				c.opts.Logf("%v", err)
			}
		}(n)
	}
	wg.Wait()
	losses := map[string]lossyfs.Loss{}
	var errs []error
	for _, n := range nodes {
		loss, err := c.dropDisk(n, mode)
		losses[n.id] = loss
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.opts.Logf("power loss of %s: %v", n.id, loss)
	}
	return losses, errors.Join(errs...)
}

// dropDisk throws n's unsynced writes away, mounts its disk again, and
// gives it a new boot.
func (c *Cluster) dropDisk(n *Node, mode PowerLossMode) (lossyfs.Loss, error) {
	var loss lossyfs.Loss
	var err error
	if n.disk != nil {
		if mode.Torn {
			loss, err = n.disk.PowerLossTorn(mode.Rng, mode.Keep)
		} else {
			loss, err = n.disk.PowerLoss()
		}
		n.disk = nil
		if err != nil {
			// The unsynced data is gone all the same (the filesystem died
			// before it unmounted); a new mount goes on top regardless.
			c.opts.Logf("%s: power loss: %v", n.id, err)
		}
	}
	n.boots++
	n.bootID = fmt.Sprintf("jepsen-%s-%s-boot%d", c.run, n.id, n.boots)
	if err := c.mountDisk(n); err != nil {
		return loss, err
	}
	return loss, nil
}

// PowerLoss is a power cut of one node followed by its restart: SIGKILL,
// unsynced writes dropped, disk remounted, node booted with a new
// QUEEN_TEST_BOOT_ID.
func (c *Cluster) PowerLoss(n *Node, mode PowerLossMode) (lossyfs.Loss, error) {
	losses, err := c.PowerOff([]*Node{n}, mode)
	if err != nil {
		return losses[n.id], err
	}
	return losses[n.id], c.Restart(n)
}

// BootID is the QUEEN_TEST_BOOT_ID n starts with ("" without LossyFS).
func (n *Node) BootID() string { return n.bootID }

// SlowDisk makes every fsync of n's disk wait d first (0: none again).
func (c *Cluster) SlowDisk(n *Node, d time.Duration) error {
	if n.disk == nil {
		return fmt.Errorf("harness: %s has no lossyfs disk", n.ID())
	}
	n.disk.SetFsyncDelay(d)
	return nil
}

// FillDisk makes n's disk full (writes fail with ENOSPC, statfs says no
// space) or frees it.
func (c *Cluster) FillDisk(n *Node, full bool) error {
	if n.disk == nil {
		return fmt.Errorf("harness: %s has no lossyfs disk", n.ID())
	}
	n.disk.SetFull(full)
	return nil
}
