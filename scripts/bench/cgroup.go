package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuCgroup is a cgroup v1 cpu controller group that caps the processes
// in it to a share of one core: quota/period of CPU time in every period.
// The period is short (10 ms) so that a capped node is throttled in small
// slices, not in 100 ms stalls that would look like latency.
type cpuCgroup struct {
	dir    string
	period int // µs
	quota  int // µs per period
}

// cgroupRoot is where this machine mounts the v1 cpu controller.
const cgroupRoot = "/sys/fs/cgroup/cpu"

const cgroupPeriodUs = 10_000

// newCPUCgroup makes (or reuses) group name capped at cores.
func newCPUCgroup(name string, cores float64) (*cpuCgroup, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 cpu controller at %s: %w", cgroupRoot, err)
	}
	c := &cpuCgroup{dir: filepath.Join(cgroupRoot, name), period: cgroupPeriodUs, quota: int(cores * cgroupPeriodUs)}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.write("cpu.cfs_period_us", c.period); err != nil {
		return nil, err
	}
	if err := c.write("cpu.cfs_quota_us", c.quota); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cpuCgroup) write(file string, v int) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(strconv.Itoa(v)), 0o644)
}

func (c *cpuCgroup) read(file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	return strings.TrimSpace(string(b)), err
}

// add moves a process, every thread of it, into the group.
func (c *cpuCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// inForce checks, from the files, that the cap is what it was set to and
// that pid is in the group: a ratio is printed only then.
func (c *cpuCgroup) inForce(pid int) error {
	period, err1 := c.read("cpu.cfs_period_us")
	quota, err2 := c.read("cpu.cfs_quota_us")
	procs, err3 := c.read("cgroup.procs")
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	if period != strconv.Itoa(c.period) || quota != strconv.Itoa(c.quota) {
		return fmt.Errorf("%s: cap reads %s/%s µs, set %d/%d", c.dir, quota, period, c.quota, c.period)
	}
	for _, p := range strings.Fields(procs) {
		if p == strconv.Itoa(pid) {
			return nil
		}
	}
	return fmt.Errorf("%s: pid %d is not in the group (%q)", c.dir, pid, procs)
}

// throttledUs is how long the group's processes waited out their quota.
func (c *cpuCgroup) throttledUs() int64 {
	s, _ := c.read("cpu.stat")
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "throttled_time" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n / 1000
		}
	}
	return 0
}

// remove deletes the group once its processes are gone (they are moved to
// the root group first, should one remain).
func (c *cpuCgroup) remove() {
	if procs, err := c.read("cgroup.procs"); err == nil {
		for _, p := range strings.Fields(procs) {
			os.WriteFile(filepath.Join(cgroupRoot, "cgroup.procs"), []byte(p), 0o644)
		}
	}
	os.Remove(c.dir)
}
