package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// runPollers answers: does a push get slower, and do the nodes spend more
// CPU, when many consumers are parked on its queue? One producer pushes one
// message at a time at -poll-rate for a third of -duration with nobody
// waiting, then with 10 long-polling pops parked on the queue, then with
// -pollers of them (pop batch 1, autoAck, wait 25 s, each on its own
// keep-alive connection, spread over the nodes). Every message pushed while
// consumers wait must reach one. The figures: push latency and node CPU
// per push in each phase; with waiters a push also costs its delivery, so
// the 10-waiter phase is the yardstick for the many-waiter one.
func runPollers(ctx context.Context, o *options) (*result, error) {
	queue := queueName("pollers")
	pool := newPayloadPool(o.payload)
	pids := nodePIDs(o)
	errs := newTally()
	pc := newClient(o.url, 1, o.timeout)
	defer pc.close()
	p := newPusher(pc, queue, pushPartitions, pool, 0)
	phases := []int{0, 10, o.pollers}
	r := newResult("pollers", o, 1, 0, 0, 0, errs)
	var total time.Duration
	for _, waiters := range phases {
		ph, err := pollPhase(ctx, o, p, queue, waiters, pids, errs)
		if err != nil {
			return r, err
		}
		total += ph.elapsed
		r.Messages += ph.pushed
		r.Requests += ph.pushed
		op := fmt.Sprintf("push/%dw", waiters)
		r.addLatency(op, summarize([]*recorder{&ph.rec}))
		r.Extra[op+"_cpu_us_per_push"] = ph.cpuPerPush
		r.Extra[op+"_delivered"] = ph.delivered
		r.notes = append(r.notes, fmt.Sprintf("%d waiters: %d pushes, %d delivered, push p50 %.3f ms p99 %.3f ms, node CPU %.1f µs per push",
			waiters, ph.pushed, ph.delivered, r.Latency[op].P50, r.Latency[op].P99, ph.cpuPerPush))
	}
	r.Seconds = round(total.Seconds(), 3)
	r.Errors = errs.total
	if errs.total > 0 {
		r.ErrorKinds, r.ErrorSamples = errs.kinds, errs.samples()
	}
	r.Extra["queue"], r.Extra["rate"] = queue, o.pollRate
	return r, nil
}

type pollResult struct {
	pushed, delivered int64
	elapsed           time.Duration
	rec               recorder
	cpuPerPush        float64
}

// pollPhase parks waiters pops, pushes at o.pollRate for a third of
// o.duration, waits for every message to be delivered (when anyone
// waits), and releases the pops.
func pollPhase(ctx context.Context, o *options, p *pusher, queue string, waiters int, pids []int, errs *tally) (*pollResult, error) {
	out := &pollResult{}
	pctx, release := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var delivered, parked atomic.Int64
	if waiters > 0 {
		cs := newClients(o.urls, waiters, 40*time.Second)
		defer cs.close()
		path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?batch=1&autoAck=true&wait=true&timeout=25000"
		for w := 0; w < waiters; w++ {
			wg.Go(func() {
				var buf bytes.Buffer
				c := cs.pick(w)
				first := true
				for pctx.Err() == nil {
					if first {
						parked.Add(1)
						first = false
					}
					status, _, err := c.do(pctx, http.MethodGet, path, nil, &buf)
					if pctx.Err() != nil {
						return
					}
					switch {
					case err != nil:
						errs.add(failed("poll", err.Error()))
						pause(pctx, errPause)
					case status == http.StatusOK:
						var pr struct {
							Messages []json.RawMessage `json:"messages"`
						}
						if json.Unmarshal(buf.Bytes(), &pr) != nil {
							errs.add(failed("poll: bad body", snippet(buf.Bytes())))
						}
						delivered.Add(int64(len(pr.Messages)))
					case status != http.StatusNoContent:
						errs.add(failed(fmt.Sprintf("poll: %d", status), snippet(buf.Bytes())))
						pause(pctx, errPause)
					}
				}
			})
		}
		// Let the pops reach the node and park before measuring.
		for parked.Load() < int64(waiters) && pause(ctx, 10*time.Millisecond) {
		}
		pause(ctx, 2*time.Second)
	}
	cpu := startCPU(pids)
	gap := time.Duration(float64(time.Second) / o.pollRate)
	next := time.Now()
	out.elapsed = runFor(ctx, 1, o.duration/3, func(int) bool {
		if d := time.Until(next); d > 0 && !pause(ctx, d) {
			return false
		}
		next = next.Add(gap)
		v, lat := p.push(ctx, 1)
		if v.bad > 0 {
			errs.add(v)
			return pause(ctx, errPause)
		}
		out.pushed++
		out.rec.add(lat)
		return true
	})
	if waiters > 0 {
		deadline := time.Now().Add(10 * time.Second)
		for delivered.Load() < out.pushed && time.Now().Before(deadline) && pause(ctx, 10*time.Millisecond) {
		}
	}
	if len(pids) > 0 && out.pushed > 0 {
		out.cpuPerPush = cpuPerMsg(cpu.used(), out.pushed)
	}
	release()
	wg.Wait()
	out.delivered = delivered.Load()
	if waiters > 0 && out.delivered < out.pushed {
		errs.add(verdict{bad: int(out.pushed - out.delivered), kind: "pollers: not delivered",
			detail: fmt.Sprintf("%d of %d pushed never reached a parked consumer", out.pushed-out.delivered, out.pushed)})
	}
	if waiters == 0 {
		// Nobody consumed this phase's messages: drain them so that the
		// next phase's waiters find only their own.
		if err := drain(ctx, o, queue); err != nil {
			return out, err
		}
	}
	return out, nil
}

// drain pops everything pending in queue with autoAck.
func drain(ctx context.Context, o *options, queue string) error {
	c := newClient(o.url, 1, o.timeout)
	defer c.close()
	var buf bytes.Buffer
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?batch=1000&partitions=100&autoAck=true"
	for i := 0; i < 1000; i++ {
		status, _, err := c.do(ctx, http.MethodGet, path, nil, &buf)
		if err != nil {
			return err
		}
		if status == http.StatusNoContent {
			return nil
		}
		if status != http.StatusOK {
			return fmt.Errorf("drain: %d %s", status, snippet(buf.Bytes()))
		}
	}
	return fmt.Errorf("drain: %s never emptied", queue)
}

// nodePIDs are the PIDs of the nodes under test, when bench knows them.
func nodePIDs(o *options) []int {
	if o.cluster != nil {
		var pids []int
		for _, n := range o.cluster.Nodes() {
			pids = append(pids, n.PID())
		}
		return pids
	}
	if o.pid > 0 {
		return []int{o.pid}
	}
	return nil
}
