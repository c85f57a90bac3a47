package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on
// every Linux this runs on).
const clockTicks = 100

// cpuOf is the CPU time (user + system) the processes have used so far.
func cpuOf(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// Fields after the command name, which is in parentheses and may
		// hold spaces: state is field 3, utime 14, stime 15.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, err
			}
			total += time.Duration(n) * time.Second / clockTicks
		}
	}
	return total, nil
}

// cpuMeter measures the CPU the processes use between start and stop.
type cpuMeter struct {
	pids  []int
	start time.Duration
}

func startCPU(pids []int) *cpuMeter {
	m := &cpuMeter{pids: pids}
	m.start, _ = cpuOf(pids)
	return m
}

// used is the CPU time since start.
func (m *cpuMeter) used() time.Duration {
	now, err := cpuOf(m.pids)
	if err != nil {
		return 0
	}
	return now - m.start
}

// machineCPU is what /proc/stat's first line says the whole machine has
// done so far: busy (user, nice, system, irq, softirq: every process and
// the kernel's own threads, the load generator's included) and steal (time
// the hypervisor ran something else while a CPU of this machine wanted to
// run).
type machineCPU struct{ busy, steal time.Duration }

func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads /proc/stat's first line, the machine's totals in
// USER_HZ ticks.
func parseProcStat(stat string) (machineCPU, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks [8]int64 // user nice system idle iowait irq softirq steal
	for i := range ticks {
		var err error
		if ticks[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return machineCPU{}, err
		}
	}
	d := func(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }
	return machineCPU{busy: d(ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]), steal: d(ticks[7])}, nil
}

// since is the machine's CPU from m to now.
func (m machineCPU) since() machineCPU {
	now, err := readMachineCPU()
	if err != nil {
		return machineCPU{}
	}
	return machineCPU{busy: now.busy - m.busy, steal: now.steal - m.steal}
}
