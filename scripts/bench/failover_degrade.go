package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// The failover faults that leave the leader running, degraded, for
// degradeHold, then heal it (jepsen/harness does both): slow-disk, every
// fsync of the leader's disk slowDiskDelay late (Queen 2.x's campaign:
// 300 ms); deaf, the leader's incoming traffic dropped, from every other
// node (it still sends: the followers keep hearing its heartbeats, and it
// must step down by itself when it hears no quorum).
const (
	slowDiskDelay = 300 * time.Millisecond
	degradeHold   = 8 * time.Second
)

func degrading(fault string) bool { return fault == "slow-disk" || fault == "deaf" }

// degradeFaults reports whether -failover-faults names one of them (the
// nodes then start under jepsen's harness).
func (o *options) degradeFaults() bool { return slices.ContainsFunc(o.failoverFaults, degrading) }

// degradeRound runs one round of a degrading fault on the leader ln while
// p pushes: the fault from at, held degradeHold, healed, then failoverAfter
// of pushing; it counts the round's pushes (a failure from the fault to
// failoverAfter past the heal is the fault's) and reports its cost.
func (o *options) degradeRound(ctx context.Context, fault string, ln *nodeproc.Node, p *steadyPusher, at time.Time, counts *failoverCounts) (degradeInfo, string, error) {
	var info degradeInfo
	hl := o.faulty.ByID(ln.ID())
	if hl == nil {
		p.halt()
		return info, "", fmt.Errorf("%s is not one of the harness's nodes", ln.ID())
	}
	var heal func() error
	switch fault {
	case "slow-disk":
		if err := o.faulty.SlowDisk(hl, slowDiskDelay); err != nil {
			p.halt()
			return info, "", err
		}
		heal = func() error { return o.faulty.SlowDisk(hl, 0) }
	case "deaf":
		for _, n := range o.faulty.Nodes() {
			if n != hl {
				if err := o.faulty.Net().OneWay(n.Index, hl.Index); err != nil {
					o.faulty.Net().Heal()
					p.halt()
					return info, "", err
				}
			}
		}
		heal = o.faulty.Net().Heal
	}
	var moved string
	if nl, err := o.cluster.AwaitNewLeader(ctx, ln.ID(), degradeHold); err == nil {
		moved = nl.ID()
	}
	pause(ctx, time.Until(at.Add(degradeHold)))
	healAt := time.Now()
	herr := heal()
	pause(ctx, failoverAfter)
	recs := p.halt()
	if herr != nil {
		return info, "", fmt.Errorf("heal %s: %w", fault, herr)
	}
	wf, _ := counts.add(recs, func(r pushRec) bool { return r.done.After(at) && r.sent.Before(healAt.Add(failoverAfter)) })
	info.cost = clientCost(recs, at)
	info.fields = map[string]any{"fault": fault, "leader": ln.ID(), "window_failures": wf, "pushes": len(recs),
		"bad_window_ms": ms(info.cost.window), "p99_before_ms": ms(info.cost.before), "p99_during_ms": ms(info.cost.during),
		"p99_after_ms": ms(info.cost.after), "new_leader": moved}
	line := fmt.Sprintf("leader %s degraded for %v, then healed", ln.ID(), degradeHold)
	if moved != "" {
		line += fmt.Sprintf("; %s led meanwhile", moved)
	} else {
		line += "; it kept its leadership"
	}
	line += fmt.Sprintf("; %d pushes failed; pushes failed or slower than 10x the p99 before (%.1f ms) for %.0f ms, p99 during %.1f ms, after %.1f ms",
		wf, ms(info.cost.before), ms(info.cost.window), ms(info.cost.during), ms(info.cost.after))
	if _, err := waitWhole(ctx, o.cluster); err != nil {
		return info, line, fmt.Errorf("after healing %s: %v", fault, err)
	}
	return info, line, nil
}

// degradeInfo is one degrading round's report.
type degradeInfo struct {
	cost   roundCost
	fields map[string]any
}
