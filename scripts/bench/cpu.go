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
