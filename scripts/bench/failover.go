package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// failover (cluster only): single pushes go at a steady rate through a
// follower while the leader is stopped, with SIGKILL or SIGTERM
// (-failover-faults). A round measures, from the signal, the first push sent
// after it that the node answers 201, and the first /api/v1/system/cluster on
// a surviving node that names a new leader; and what the fault cost the
// client: the longest run of pushes that failed or took over 10× the p99 of
// the pushes before the fault, and the push p99 before, during that window
// and after it. The stopped node is then restarted (nodeproc, on its data
// dir and ports) and the cluster must be whole again before the next round.
const (
	failoverSenders = 1024            // pushes in flight at most (50/s for the 30 s -timeout would be 1500); a tick with none free is counted as skipped
	failoverWarmup  = 3 * time.Second // steady pushing before the kill
	failoverAfter   = 3 * time.Second // and after recovery
	clusterReady    = 60 * time.Second
)

// pushRec is one push of the steady pusher.
type pushRec struct {
	sent, done time.Time
	v          verdict
}

// steadyPusher sends one single-item push per tick to one node.
type steadyPusher struct {
	c       *client
	queue   string
	payload string
	prefix  string
	seq     atomic.Int64
	skipped atomic.Int64
	flying  atomic.Int64 // pushes in flight
	peak    atomic.Int64 // most pushes in flight at once

	mu   sync.Mutex
	recs []pushRec

	stop chan struct{}
	wg   sync.WaitGroup
}

func startSteadyPusher(ctx context.Context, c *client, queue, prefix, payload string, rate float64) *steadyPusher {
	p := &steadyPusher{c: c, queue: queue, prefix: prefix, payload: payload, stop: make(chan struct{})}
	sem := make(chan struct{}, failoverSenders)
	p.wg.Go(func() {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.stop:
				return
			case <-t.C:
			}
			select {
			case sem <- struct{}{}:
			default:
				p.skipped.Add(1)
				continue
			}
			n := p.flying.Add(1)
			for {
				old := p.peak.Load()
				if n <= old || p.peak.CompareAndSwap(old, n) {
					break
				}
			}
			p.wg.Go(func() {
				defer func() { <-sem; p.flying.Add(-1) }()
				p.one(ctx)
			})
		}
	})
	return p
}

func (p *steadyPusher) one(ctx context.Context) {
	n := p.seq.Add(1)
	b := []byte(`{"items":[{"queue":`)
	b = strconv.AppendQuote(b, p.queue)
	b = append(b, `,"partition":"p0","transactionId":"`...)
	b = append(b, p.prefix...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `","payload":{"d":"`...)
	b = append(b, p.payload...)
	b = append(b, `"}}]}`...)
	var buf bytes.Buffer
	sent := time.Now()
	status, _, err := p.c.do(ctx, http.MethodPost, "/api/v1/push", b, &buf)
	done := time.Now()
	if ctx.Err() != nil {
		return
	}
	v := failed("push transport", "")
	if err == nil {
		v = checkPush(status, buf.Bytes(), 1)
	} else {
		v.detail = err.Error()
	}
	p.mu.Lock()
	p.recs = append(p.recs, pushRec{sent, done, v})
	p.mu.Unlock()
}

// firstOKSince is when the first push sent at or after t was answered 201.
func (p *steadyPusher) firstOKSince(t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for _, r := range p.recs {
		if r.v.good == 1 && !r.sent.Before(t) && (first.IsZero() || r.done.Before(first)) {
			first = r.done
		}
	}
	return first
}

// halt stops the ticks and waits for the pushes in flight.
func (p *steadyPusher) halt() []pushRec {
	close(p.stop)
	p.wg.Wait()
	return p.recs
}

// waitWhole waits until every node bench started runs and answers /health
// 200, all name one leader, and that leader lists every node as a live
// voter. It returns the leader.
func waitWhole(ctx context.Context, c *nodeproc.Cluster) (*nodeproc.Node, error) {
	if err := c.Healthy(ctx, clusterReady); err != nil {
		return nil, err
	}
	if err := c.WaitVoters(ctx, clusterReady, c.Nodes()...); err != nil {
		return nil, err
	}
	return c.WaitLeader(ctx, clusterReady)
}

func runFailover(ctx context.Context, o *options) (*result, error) {
	cl := o.cluster
	if cl == nil || len(cl.Nodes()) < 3 {
		return nil, errors.New("failover needs a cluster bench started itself: -start 3 or more (scripts/bench.sh -cluster)")
	}
	queue := queueName("failover")
	pool := newPayloadPool(o.payload)
	counts := &failoverCounts{errs: newTally(), window: newTally()}
	var toOK, toLeader, toReady recorder
	var skipped, peak int64
	var rounds []map[string]any
	var notes []string
	faults := o.failoverFaults
	if len(faults) == 0 {
		faults = []string{"kill", "term"}
	}
	costs := map[string]*faultCost{}
	start := time.Now()
	var runErr error
	for round := 1; round <= o.failoverRounds*len(faults) && ctx.Err() == nil; round++ {
		fault := faults[(round-1)%len(faults)]
		ln, err := waitWhole(ctx, cl)
		if err != nil {
			runErr = fmt.Errorf("round %d: %v", round, err)
			break
		}
		leader, pid := ln.ID(), ln.PID()
		var via *nodeproc.Node // the first follower by id
		for _, n := range cl.Nodes() {
			if n != ln && (via == nil || n.ID() < via.ID()) {
				via = n
			}
		}
		target := via.ID()
		c := newClient(via.URL(), failoverSenders, o.timeout)
		p := startSteadyPusher(ctx, c, queue, fmt.Sprintf("r%d-", round), pool[0], o.failoverRate)
		pause(ctx, failoverWarmup)

		kill := time.Now()
		if degrading(fault) {
			info, line, err := o.degradeRound(ctx, fault, ln, p, kill, counts)
			c.close()
			skipped += p.skipped.Load()
			peak = max(peak, p.peak.Load())
			if err != nil {
				runErr = fmt.Errorf("round %d: %v", round, err)
				break
			}
			if costs[fault] == nil {
				costs[fault] = &faultCost{}
			}
			costs[fault].add(info.cost)
			info.fields["round"] = round
			rounds = append(rounds, info.fields)
			notes = append(notes, fmt.Sprintf("round %d: %s, pushing via %s at %.0f/s: %s", round, faultName(fault), target, o.failoverRate, line))
			continue
		}
		var err2 error
		if fault == "term" {
			_, _, err2 = ln.Terminate(30 * time.Second)
		} else {
			err2 = ln.Kill()
		}
		if err2 != nil {
			p.halt()
			c.close()
			runErr = fmt.Errorf("round %d: %s %d (leader %s): %v", round, signalName(fault), pid, leader, err2)
			break
		}
		until := kill.Add(o.failoverTimeout)
		var leaderAt, okAt time.Time
		var newLeader string
		leaderDone := make(chan struct{})
		go func() {
			defer close(leaderDone)
			if nl, err := cl.AwaitNewLeader(ctx, leader, time.Until(until)); err == nil {
				leaderAt, newLeader = time.Now(), nl.ID()
			}
		}()
		for ctx.Err() == nil && time.Now().Before(until) {
			if okAt = p.firstOKSince(kill); !okAt.IsZero() {
				break
			}
			pause(ctx, 5*time.Millisecond)
		}
		<-leaderDone
		pause(ctx, failoverAfter)
		recs := p.halt()
		c.close()
		skipped += p.skipped.Load()
		peak = max(peak, p.peak.Load())

		// A failure is the failover's when the push was in flight at the
		// kill or sent before the first success after it; any other is an
		// error of the run.
		wf, wk := counts.add(recs, func(r pushRec) bool { return r.done.After(kill) && (okAt.IsZero() || r.sent.Before(okAt)) })
		cost := clientCost(recs, kill)
		if costs[fault] == nil {
			costs[fault] = &faultCost{}
		}
		costs[fault].add(cost)
		info := map[string]any{"round": round, "fault": fault, "killed": leader, "killed_pid": pid, "pushed_via": target,
			"window_failures": wf, "pushes": len(recs), "bad_window_ms": ms(cost.window),
			"p99_before_ms": ms(cost.before), "p99_during_ms": ms(cost.during), "p99_after_ms": ms(cost.after)}
		line := fmt.Sprintf("round %d: %s leader %s (pid %d), pushing via %s at %.0f/s: ", round, signalName(fault), leader, pid, target, o.failoverRate)
		if leaderAt.IsZero() {
			counts.errs.add(failed("no new leader within -failover-timeout", fmt.Sprintf("round %d", round)))
			line += "no new leader seen"
		} else {
			d := leaderAt.Sub(kill)
			toLeader.add(d)
			info["new_leader"], info["kill_to_leader_ms"] = newLeader, ms(d)
			line += fmt.Sprintf("new leader %s after %.0f ms", newLeader, ms(d))
		}
		if okAt.IsZero() {
			counts.errs.add(failed("no successful push within -failover-timeout", fmt.Sprintf("round %d", round)))
			line += ", no 201"
		} else {
			d := okAt.Sub(kill)
			toOK.add(d)
			info["kill_to_201_ms"] = ms(d)
			line += fmt.Sprintf(", first 201 after %.0f ms", ms(d))
		}
		line += fmt.Sprintf("; %d pushes failed in the window; pushes failed or slower than 10x the p99 before (%.1f ms) for %.0f ms, p99 during %.1f ms, after %.1f ms",
			wf, ms(cost.before), ms(cost.window), ms(cost.during), ms(cost.after))
		if wf > 0 {
			line += " (" + strings.Join(kindCounts(wk), ", ") + ")"
		}

		restarted := time.Now()
		if err := ln.Restart(ctx); err != nil {
			rounds = append(rounds, info)
			notes = append(notes, line)
			runErr = fmt.Errorf("round %d: restart of %s: %v", round, leader, err)
			break
		}
		newPID := ln.PID()
		if _, err := waitWhole(ctx, cl); err != nil {
			rounds = append(rounds, info)
			notes = append(notes, line)
			runErr = fmt.Errorf("round %d: after restarting %s: %v", round, leader, err)
			break
		}
		d := time.Since(restarted)
		toReady.add(d)
		info["restarted_pid"], info["restart_to_whole_ms"] = newPID, ms(d)
		line += fmt.Sprintf("; restarted %s (pid %d), cluster whole after %.0f ms", leader, newPID, ms(d))
		rounds = append(rounds, info)
		notes = append(notes, line)
	}
	r := newResult("failover", o, int(peak), time.Since(start), counts.ok, counts.pushes, counts.errs) // conns: most pushes in flight at once
	r.addLatency("push", summarize([]*recorder{&counts.pushLat}))
	r.addLatency("kill_to_201", summarize([]*recorder{&toOK}))
	r.addLatency("kill_to_leader", summarize([]*recorder{&toLeader}))
	r.addLatency("restart_to_whole", summarize([]*recorder{&toReady}))
	r.Extra = map[string]any{"queue": queue, "rate": o.failoverRate, "rounds": rounds,
		"window_failures": counts.windowFails, "skipped_ticks": skipped, "peak_in_flight": peak}
	if counts.windowFails > 0 {
		r.Extra["window_failure_kinds"] = counts.window.kinds
	}
	r.notes = append(r.notes, "kill_to_201: kill to the answer of the first push sent after the kill that got 201; kill_to_leader: kill to the first cluster view of a survivor naming another leader; restart_to_whole: restart to all nodes healthy with one leader")
	r.notes = append(r.notes, notes...)
	costOut := map[string]any{}
	for _, f := range faults {
		if fc := costs[f]; fc != nil {
			r.notes = append(r.notes, fmt.Sprintf("cost of a %s of the leader over %d rounds: longest window of failed or >10x-p99 pushes %.0f ms; push p99 before %.1f ms, during %.1f ms, after %.1f ms (the worst round of each)",
				faultName(f), fc.rounds, ms(fc.window), ms(fc.before), ms(fc.during), ms(fc.after)))
			costOut[f] = map[string]any{"rounds": fc.rounds, "bad_window_ms": ms(fc.window), "p99_before_ms": ms(fc.before),
				"p99_during_ms": ms(fc.during), "p99_after_ms": ms(fc.after)}
		}
	}
	r.Extra["cost"] = costOut
	r.notes = append(r.notes, fmt.Sprintf("%d pushes, %d 201; %d failed inside failover windows (not counted as errors); %d ticks skipped for want of a free sender (of %d)",
		counts.pushes, counts.ok, counts.windowFails, skipped, failoverSenders))
	if len(counts.window.order) > 0 {
		for _, s := range counts.window.samples() {
			r.notes = append(r.notes, "window failure sample: "+s)
		}
	}
	return r, runErr
}

// kindCounts is "kind: n" for each failure kind, most frequent first.
func kindCounts(t *tally) []string {
	type kc struct {
		k string
		n int64
	}
	var ks []kc
	for k, n := range t.kinds {
		ks = append(ks, kc{k, n})
	}
	slices.SortFunc(ks, func(a, b kc) int {
		return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.k, b.k))
	})
	out := make([]string, len(ks))
	for i, e := range ks {
		out[i] = fmt.Sprintf("%s: %d", e.k, e.n)
	}
	return out
}

func signalName(fault string) string {
	if fault == "term" {
		return "SIGTERM"
	}
	return "kill -9"
}

// faultName names a failover fault in the report.
func faultName(fault string) string {
	switch fault {
	case "slow-disk":
		return fmt.Sprintf("slow disk (fsyncs %v late)", slowDiskDelay)
	case "deaf":
		return "deaf leader (it hears nobody)"
	}
	return signalName(fault)
}

// failoverCounts are the run's pushes over every round.
type failoverCounts struct {
	pushes, ok, windowFails int64
	pushLat                 recorder
	errs, window            *tally
}

// add counts a round's pushes: a failure inWindow is the fault's (counted
// apart), any other an error of the run. It returns the round's window
// failures.
func (fc *failoverCounts) add(recs []pushRec, inWindow func(pushRec) bool) (int64, *tally) {
	var wf int64
	wk := newTally()
	for _, r := range recs {
		fc.pushes++
		if r.v.good == 1 {
			fc.ok++
			fc.pushLat.add(r.done.Sub(r.sent))
			continue
		}
		if inWindow(r) {
			wf++
			wk.add(r.v)
			continue
		}
		fc.errs.add(r.v)
	}
	fc.windowFails += wf
	fc.window.merge(wk)
	return wf, wk
}

// roundCost is what one fault cost the steady pusher: the longest run of
// consecutive pushes (by send time) that failed or took over 10× the p99 of
// the pushes sent in the second before the fault, from the first one's send to the last
// one's answer; and the push p99 before the fault, during that window, and
// after it.
type roundCost struct {
	window, before, during, after time.Duration
}

func clientCost(recs []pushRec, fault time.Time) roundCost {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b pushRec) int { return a.sent.Compare(b.sent) })
	var pre []time.Duration // the last second before the fault: the cluster's steady state
	for _, r := range recs {
		if r.sent.Before(fault) && !r.sent.Before(fault.Add(-time.Second)) && r.v.good == 1 {
			pre = append(pre, r.done.Sub(r.sent))
		}
	}
	var c roundCost
	c.before = p99Of(pre)
	slow := 10 * c.before
	bad := func(r pushRec) bool { return r.v.good != 1 || (slow > 0 && r.done.Sub(r.sent) > slow) }
	var wStart, wEnd, runStart time.Time
	var runEnd time.Time
	inRun := false
	for _, r := range recs {
		if r.done.Before(fault) {
			continue
		}
		if bad(r) {
			if !inRun {
				runStart, inRun = r.sent, true
			}
			if r.done.After(runEnd) {
				runEnd = r.done
			}
			if runEnd.Sub(runStart) > wEnd.Sub(wStart) {
				wStart, wEnd = runStart, runEnd
			}
			continue
		}
		inRun, runEnd = false, time.Time{}
	}
	c.window = wEnd.Sub(wStart)
	var during, after []time.Duration
	end := wEnd
	if end.IsZero() {
		end = fault
	}
	for _, r := range recs {
		lat := r.done.Sub(r.sent)
		switch {
		case r.sent.Before(fault):
		case !r.sent.After(end):
			during = append(during, lat)
		default:
			after = append(after, lat)
		}
	}
	c.during, c.after = p99Of(during), p99Of(after)
	return c
}

// faultCost is the worst of a fault's rounds.
type faultCost struct {
	rounds                        int
	window, before, during, after time.Duration
}

func (f *faultCost) add(c roundCost) {
	f.rounds++
	f.window, f.before = max(f.window, c.window), max(f.before, c.before)
	f.during, f.after = max(f.during, c.during), max(f.after, c.after)
}

func p99Of(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*99/100)]
}
