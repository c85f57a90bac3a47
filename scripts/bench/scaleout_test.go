package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A phase that kept the machine busier than machineBusyLimit of its cores
// is named in a warning beside the ratio; one within it is not.
func TestScaleoutReportWarnsOfABusyMachine(t *testing.T) {
	o := &options{scaleCap: 0.3, scaleRouted: true}
	phase := func(msgs int64, busy float64) scalePhase {
		secs := 10.0
		return scalePhase{msgs: msgs, secs: secs, cpu: []time.Duration{3 * time.Second, time.Second, time.Second},
			throttled: []int64{0, 0, 0}, load: time.Second,
			machine: machineCPU{busy: time.Duration(busy * secs * float64(runtime.NumCPU()) * float64(time.Second))}}
	}
	run := func(groups int, busyEO float64) *scaleRun {
		return &scaleRun{round: 1, groups: groups, leaders: []string{"n1", "n2", "n3"}[:groups], nodes: []string{"n1", "n2", "n3"},
			push: phase(1000, 0.5), eo: phase(100*int64(groups), busyEO)}
	}
	for _, tc := range []struct {
		busy float64 // share of the cores the three-group eo phase kept busy
		warn bool
	}{{0.6, false}, {machineBusyLimit + 0.1, true}} {
		var out bytes.Buffer
		reportScaleout(&out, o, []*scaleRun{run(1, 0.5)}, []*scaleRun{run(3, tc.busy)})
		warned := strings.Contains(out.String(), "WARNING: round 1 --raft-groups 3 eo kept the machine")
		if warned != tc.warn || strings.Contains(out.String(), "--raft-groups 1 eo kept") {
			t.Errorf("machine %.0f%% busy: warned %v, want %v:\n%s", 100*tc.busy, warned, tc.warn, out.String())
		}
		if !strings.Contains(out.String(), "scaleout eo:") {
			t.Errorf("no ratio printed:\n%s", out.String())
		}
	}
}
