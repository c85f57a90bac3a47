package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

const pushPartitions = 16

func runPushBatch(ctx context.Context, o *options) (*result, error) {
	return runPush(ctx, o, "push-batch", o.conns, o.batch)
}

func runPushSingle(ctx context.Context, o *options) (*result, error) {
	return runPush(ctx, o, "push-single", o.conns, 1)
}

func runLatency(ctx context.Context, o *options) (*result, error) {
	return runPush(ctx, o, "latency", 1, 1)
}

// pushCounts is one worker's tally of requests and queued messages.
type pushCounts struct {
	reqs, msgs int64
	rec        recorder
}

// runPush has conns producers push perReq items per request to a fresh
// queue of 16 partitions for o.duration.
func runPush(ctx context.Context, o *options, name string, conns, perReq int) (*result, error) {
	cs := newClients(o.urls, conns, o.timeout)
	defer cs.close()
	queue := queueName(name)
	pool := newPayloadPool(o.payload)
	errs := newTally()
	ps := make([]*pusher, conns)
	counts := make([]pushCounts, conns)
	for w := range ps {
		ps[w] = newPusher(cs.pick(w), queue, pushPartitions, pool, w)
		ps[w].next = w % pushPartitions
	}
	elapsed := runFor(ctx, conns, o.duration, func(w int) bool {
		v, lat := ps[w].push(ctx, perReq)
		if ctx.Err() != nil {
			return false // interrupted: not the node's failure
		}
		counts[w].reqs++
		counts[w].msgs += int64(v.good)
		if v.bad > 0 {
			errs.add(v)
			return pause(ctx, errPause)
		}
		counts[w].rec.add(lat)
		return true
	})
	var msgs, reqs int64
	recs := make([]*recorder, conns)
	for w := range counts {
		msgs += counts[w].msgs
		reqs += counts[w].reqs
		recs[w] = &counts[w].rec
	}
	r := newResult(name, o, conns, elapsed, msgs, reqs, errs)
	r.addLatency("push", summarize(recs))
	r.Extra["items_per_request"] = perReq
	r.Extra["partitions"] = pushPartitions
	r.Extra["queue"] = queue
	r.Extra["urls"] = cs.used(conns)
	return r, nil
}

// fillResult is what fill managed to push.
type fillResult struct {
	queued, reqs int64
	elapsed      time.Duration
	errs         *tally
	lat          latSummary
}

// fill pushes total messages to queue over parts partitions, batch items
// per request, with o.conns producers, giving up after limit. Only items
// the node answered "queued" count.
func fill(ctx context.Context, o *options, queue string, parts, total, batch int, limit time.Duration) fillResult {
	cs := newClients(o.urls, o.conns, o.timeout)
	defer cs.close()
	pool := newPayloadPool(o.payload)
	var claimed, queued, reqs atomic.Int64
	fr := fillResult{errs: newTally()}
	ps := make([]*pusher, o.conns)
	recs := make([]*recorder, o.conns)
	for w := range ps {
		ps[w] = newPusher(cs.pick(w), queue, parts, pool, w)
		ps[w].next = w % parts
		recs[w] = &recorder{}
	}
	fr.elapsed = runFor(ctx, o.conns, limit, func(w int) bool {
		end := claimed.Add(int64(batch))
		n := min(int64(batch), int64(total)-(end-int64(batch)))
		if n <= 0 {
			return false
		}
		v, lat := ps[w].push(ctx, int(n))
		if ctx.Err() != nil {
			return false
		}
		reqs.Add(1)
		queued.Add(int64(v.good))
		if v.bad > 0 {
			fr.errs.add(v)
			return pause(ctx, errPause)
		}
		recs[w].add(lat)
		return true
	})
	fr.queued, fr.reqs = queued.Load(), reqs.Load()
	fr.lat = summarize(recs)
	return fr
}

func (fr fillResult) String() string {
	rate := 0.0
	if s := fr.elapsed.Seconds(); s > 0 {
		rate = float64(fr.queued) / s
	}
	return fmt.Sprintf("queued %d msgs in %.1fs (%.0f msg/s, %d requests, %d errors)",
		fr.queued, fr.elapsed.Seconds(), rate, fr.reqs, fr.errs.total)
}
