package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// timers (issue 5): producers schedule timers at a steady rate through POST
// /api/v1/timers (addendum §2) into a fresh destination queue while
// consumers drain it. Every fired message carries its schedule's txn as
// transactionId, so it is matched to the deliverAt its schedule returned:
// lateness = fired createdAt - deliverAt.
const (
	timerSchedulers = 4
	timerConsumers  = 8
	timerPartitions = 16
	timerPopBatch   = 100
	timerDrainCap   = 15 * time.Second // after the last due time, to pop what fired
	timerLateness   = "queen_timers_lateness_seconds"
	timerFired      = `queen_timers_fired_total{result="fired"}`
)

type schedRec struct {
	txn       string
	deliverAt time.Time
}

type fireRec struct {
	txn       string
	createdAt time.Time
}

// timerScheduler is one producer connection.
type timerScheduler struct {
	calls, scheduled int64
	rec              recorder
	sched            []schedRec
	txns             []string
	rng              *rand.Rand
	prefix           string
	seq              int
	body             []byte
	buf              bytes.Buffer
}

// timerConsumer is one consumer connection of the destination queue.
type timerConsumer struct {
	pops, empty, acks, acked int64
	popRec                   recorder
	fires                    []fireRec
	buf                      bytes.Buffer
	batch                    ackBatch
}

func runTimers(ctx context.Context, o *options) (*result, error) {
	queue := queueName("timers")
	errs := newTally()
	promBefore, promErr := scrapeAll(ctx, o.urls)
	cl := newClients(o.urls, timerSchedulers+timerConsumers, o.timeout)
	defer cl.close()
	pool := newPayloadPool(o.payload)
	b64 := make([]string, len(pool))
	for i, p := range pool {
		b64[i] = base64.StdEncoding.EncodeToString([]byte(`{"d":"` + p + `"}`))
	}

	var scheduledOK, popped atomic.Int64
	var drainBy atomic.Int64 // unix ns; 0 while scheduling
	start := time.Now()
	hardStop := start.Add(o.duration + o.timerMaxDelay + timerDrainCap)
	popPath := "/api/v1/pop/queue/" + url.PathEscape(queue) +
		fmt.Sprintf("?batch=%d&consumerGroup=%s&subscriptionMode=all&wait=true&timeout=500", timerPopBatch, benchGroup)
	cons := make([]timerConsumer, timerConsumers)
	var wg sync.WaitGroup
	for i := range cons {
		c := cl.pick(timerSchedulers + i)
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(hardStop) {
				if d := drainBy.Load(); d != 0 && (popped.Load() >= scheduledOK.Load() || time.Now().UnixNano() > d) {
					return
				}
				if !cons[i].cycle(ctx, c, popPath, errs, &popped) {
					return
				}
			}
		})
	}

	scheds := make([]timerScheduler, timerSchedulers)
	for w := range scheds {
		scheds[w].rng = rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
		scheds[w].prefix = runID + "-t" + strconv.Itoa(w) + "-"
	}
	var slot atomic.Int64
	deadline := start.Add(o.duration)
	maxDelayMs := int(o.timerMaxDelay / time.Millisecond)
	schedElapsed := runFor(ctx, timerSchedulers, o.duration, func(w int) bool {
		if o.timerRate > 0 { // slot k starts at start + k*batch/rate, whoever takes it
			k := slot.Add(1) - 1
			at := start.Add(time.Duration(float64(k) * float64(o.timerBatch) / o.timerRate * float64(time.Second)))
			if !at.Before(deadline) {
				return false
			}
			if d := time.Until(at); d > 0 && !pause(ctx, d) {
				return false
			}
		}
		s := &scheds[w]
		ok := s.schedule(ctx, cl.pick(w), queue, o.timerBatch, maxDelayMs, b64, errs)
		scheduledOK.Store(sumScheduled(scheds)) // read by the consumers' stop test only
		return ok
	})
	schedEnd := time.Now()
	scheduledOK.Store(sumScheduled(scheds))
	drainBy.Store(schedEnd.Add(o.timerMaxDelay + timerDrainCap).UnixNano())
	wg.Wait()
	drained := time.Now()
	promAfter, promErr2 := scrapeAll(ctx, o.urls)

	// Match every fired message to its schedule.
	due := map[string]time.Time{}
	var calls, scheduled int64
	schedRecs := make([]*recorder, len(scheds))
	for i := range scheds {
		calls, scheduled = calls+scheds[i].calls, scheduled+scheds[i].scheduled
		schedRecs[i] = &scheds[i].rec
		for _, r := range scheds[i].sched {
			due[r.txn] = r.deliverAt
		}
	}
	var late recorder
	seen := map[string]bool{}
	var pops, empty, acks, acked, fired, steady int64
	popRecs := make([]*recorder, len(cons))
	var first, last time.Time
	winFrom, winTo := start.Add(o.timerMaxDelay), schedEnd
	for i := range cons {
		c := &cons[i]
		pops, empty, acks, acked = pops+c.pops, empty+c.empty, acks+c.acks, acked+c.acked
		popRecs[i] = &c.popRec
		for _, f := range c.fires {
			at, ok := due[f.txn]
			switch {
			case !ok:
				errs.add(failed("fired message with an unknown txn", f.txn))
				continue
			case seen[f.txn]:
				errs.add(failed("timer fired twice", f.txn))
				continue
			}
			seen[f.txn] = true
			fired++
			d := f.createdAt.Sub(at)
			if d < 0 {
				errs.add(failed("fired before deliverAt", fmt.Sprintf("txn %s createdAt %s deliverAt %s", f.txn, f.createdAt.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))))
			}
			late.add(d)
			if first.IsZero() || f.createdAt.Before(first) {
				first = f.createdAt
			}
			if f.createdAt.After(last) {
				last = f.createdAt
			}
			if !f.createdAt.Before(winFrom) && !f.createdAt.After(winTo) {
				steady++
			}
		}
	}
	if missing := scheduled - fired; missing > 0 {
		errs.add(verdict{bad: int(missing), kind: "timer not popped by the drain deadline",
			detail: fmt.Sprintf("%d of %d scheduled timers never came out of %s", missing, scheduled, queue)})
	}

	r := newResult("timers", o, timerSchedulers+timerConsumers, schedElapsed, scheduled, calls, errs)
	r.addLatency("schedule", summarize(schedRecs))
	r.addLatency("lateness", summarize([]*recorder{&late}))
	r.addLatency("pop", summarize(popRecs))
	firedRate, rateHow := 0.0, ""
	if win := winTo.Sub(winFrom).Seconds(); win >= 1 {
		firedRate = float64(steady) / win
		rateHow = fmt.Sprintf("fires with createdAt in [start+%v, end of scheduling], %.1fs", o.timerMaxDelay, win)
	} else if span := last.Sub(first).Seconds(); span > 0 {
		firedRate = float64(fired) / span
		rateHow = fmt.Sprintf("all fires over their createdAt span, %.1fs", span)
	}
	r.Extra = map[string]any{
		"queue": queue, "schedulers": timerSchedulers, "consumers": timerConsumers,
		"target_rate": o.timerRate, "ops_per_call": o.timerBatch, "max_delay_ms": maxDelayMs,
		"partitions": timerPartitions, "scheduled": scheduled, "fired_popped": fired,
		"fired_per_s": round(firedRate, 1), "pops": pops, "empty_pops": empty, "acks": acks,
		"acked": acked, "drain_seconds": round(drained.Sub(schedEnd).Seconds(), 3), "urls": cl.used(timerSchedulers + timerConsumers),
	}
	r.notes = append(r.notes,
		fmt.Sprintf("scheduled %d timers in %d calls of %d ops (target %.0f/s, delayMs uniform 0..%d, %d partitions): %.0f/s",
			scheduled, calls, o.timerBatch, o.timerRate, maxDelayMs, timerPartitions, r.MsgPerSec),
		fmt.Sprintf("fired and popped %d of %d; fired/s %.0f (%s); drained %.1fs after scheduling stopped",
			fired, scheduled, firedRate, rateHow, drained.Sub(schedEnd).Seconds()),
		"lateness = fired message createdAt - the deliverAt its schedule returned")
	if err := firstErr(promErr, promErr2); err != nil {
		r.notes = append(r.notes, "node metrics not read: "+err.Error())
		return r, nil
	}
	secs := drained.Sub(start).Seconds()
	dFired := promAfter[timerFired] - promBefore[timerFired]
	r.Extra["node_fired_total_delta"] = dFired
	r.Extra["node_fired_per_s_over_run"] = round(dFired/secs, 1)
	for _, res := range []string{"deferred", "dead_letter"} {
		k := `queen_timers_fired_total{result="` + res + `"}`
		if d := promAfter[k] - promBefore[k]; d != 0 {
			r.Extra["node_"+res+"_delta"] = d
			r.notes = append(r.notes, fmt.Sprintf("node counted %s = %.0f", k, d))
		}
	}
	h := histDelta(promBefore.histogram(timerLateness), promAfter.histogram(timerLateness))
	if len(h) == 0 {
		r.notes = append(r.notes, "node has no "+timerLateness+" histogram")
		return r, nil
	}
	n := h[len(h)-1].count
	p50, p99 := histQuantile(h, 0.5)*1e3, histQuantile(h, 0.99)*1e3
	r.Extra["node_lateness_count"] = n
	if !math.IsNaN(p50) {
		r.Extra["node_lateness_p50_ms"], r.Extra["node_lateness_p99_ms"] = round(p50, 3), round(p99, 3)
	}
	r.notes = append(r.notes,
		fmt.Sprintf("node queen_timers_fired_total{result=\"fired\"} +%.0f over %.1fs (%.0f/s, scheduling and drain)", dFired, secs, dFired/secs),
		fmt.Sprintf("node %s (fire time - due time): n=%.0f p50~%.2fms p99~%.2fms (bucket interpolation, buckets 1ms*2^k)", timerLateness, n, p50, p99))
	return r, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func sumScheduled(s []timerScheduler) int64 {
	// Each scheduler adds to its own count; a racy sum is only a stop hint,
	// so read them through atomic loads.
	var n int64
	for i := range s {
		n += atomic.LoadInt64(&s[i].scheduled)
	}
	return n
}

// schedule sends one POST /api/v1/timers of n schedules; false when the run
// should stop.
func (s *timerScheduler) schedule(ctx context.Context, c *client, queue string, n, maxDelayMs int, b64 []string, errs *tally) bool {
	b := append(s.body[:0], `{"operations":[`...)
	s.txns = s.txns[:0]
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		txn := s.prefix + strconv.Itoa(s.seq)
		s.txns = append(s.txns, txn)
		b = append(b, `{"op":"schedule","queue":`...)
		b = strconv.AppendQuote(b, queue)
		b = append(b, `,"timerKey":"k`...)
		b = append(b, txn...)
		b = append(b, `","partition":"p`...)
		b = strconv.AppendInt(b, int64(s.seq%timerPartitions), 10)
		b = append(b, `","delayMs":`...)
		b = strconv.AppendInt(b, int64(s.rng.IntN(maxDelayMs+1)), 10)
		b = append(b, `,"txn":"`...)
		b = append(b, txn...)
		b = append(b, `","payload":"`...)
		b = append(b, b64[s.rng.IntN(len(b64))]...)
		b = append(b, `"}`...)
		s.seq++
	}
	b = append(b, "]}"...)
	s.body = b
	status, lat, err := c.do(ctx, http.MethodPost, "/api/v1/timers", b, &s.buf)
	if ctx.Err() != nil {
		return false
	}
	s.calls++
	if err != nil {
		errs.add(failed("schedule transport", err.Error()))
		return pause(ctx, errPause)
	}
	recs, v := checkTimers(status, s.buf.Bytes(), s.txns)
	s.sched = append(s.sched, recs...)
	atomic.AddInt64(&s.scheduled, int64(v.good))
	if v.bad > 0 {
		errs.add(v)
		return pause(ctx, errPause)
	}
	s.rec.add(lat)
	return true
}

// checkTimers wants 200 and one result per op, index-aligned (addendum
// §2): ok:true, status "scheduled", the op's txn echoed and a deliverAt.
// It returns the schedules that succeeded.
func checkTimers(status int, body []byte, txns []string) ([]schedRec, verdict) {
	if status != http.StatusOK {
		return nil, failed(fmt.Sprintf("schedule HTTP %d", status), snippet(body))
	}
	var out struct {
		Results []struct {
			OK        bool    `json:"ok"`
			Status    string  `json:"status"`
			Txn       *string `json:"txn"`
			DeliverAt string  `json:"deliverAt"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, failed("schedule bad body", err.Error()+": "+snippet(body))
	}
	if len(out.Results) != len(txns) {
		return nil, failed("schedule result count", fmt.Sprintf("sent %d ops, got %d results", len(txns), len(out.Results)))
	}
	var v verdict
	recs := make([]schedRec, 0, len(txns))
	for i, res := range out.Results {
		at, err := time.Parse(time.RFC3339Nano, res.DeliverAt)
		switch {
		case !res.OK || res.Status != "scheduled":
			v.bad++
			v.kind, v.detail = "schedule op "+res.Status, fmt.Sprintf("op %d: %s", i, snippet(body))
		case res.Txn == nil || *res.Txn != txns[i]:
			v.bad++
			v.kind, v.detail = "schedule op txn mismatch", fmt.Sprintf("op %d: sent %q: %s", i, txns[i], snippet(body))
		case err != nil:
			v.bad++
			v.kind, v.detail = "schedule op deliverAt", fmt.Sprintf("op %d: %v", i, err)
		default:
			v.good++
			recs = append(recs, schedRec{txns[i], at})
		}
	}
	return recs, v
}

// cycle is one long-poll pop of the destination queue and one ack/batch of
// what it delivered; false when the run should stop.
func (tc *timerConsumer) cycle(ctx context.Context, c *client, path string, errs *tally, popped *atomic.Int64) bool {
	status, lat, err := c.do(ctx, http.MethodGet, path, nil, &tc.buf)
	if ctx.Err() != nil {
		return false
	}
	tc.pops++
	if err != nil {
		errs.add(failed("pop transport", err.Error()))
		return pause(ctx, errPause)
	}
	if status == http.StatusNoContent {
		tc.empty++
		return pause(ctx, emptyPause)
	}
	fires, items, v := checkTimerPop(status, tc.buf.Bytes())
	if v.bad > 0 {
		errs.add(v)
		if len(items) == 0 {
			return pause(ctx, errPause)
		}
	}
	if len(items) == 0 {
		tc.empty++
		return pause(ctx, emptyPause)
	}
	tc.popRec.add(lat)
	tc.fires = append(tc.fires, fires...)
	popped.Add(int64(len(fires)))
	tc.batch.ConsumerGroup = benchGroup
	tc.batch.Acknowledgments = items
	body, err := json.Marshal(&tc.batch)
	if err != nil {
		errs.add(failed("ack marshal", err.Error()))
		return false
	}
	status, _, err = c.do(ctx, http.MethodPost, "/api/v1/ack/batch", body, &tc.buf)
	if ctx.Err() != nil {
		return false
	}
	tc.acks++
	if err != nil {
		errs.add(failed("ack transport", err.Error()))
		return pause(ctx, errPause)
	}
	av := checkAck(status, tc.buf.Bytes(), len(items))
	tc.acked += int64(av.good)
	if av.bad > 0 {
		errs.add(av)
		return pause(ctx, errPause)
	}
	return true
}

// checkTimerPop reads a pop of fired timers: each message's transactionId
// (the schedule's txn) and createdAt, and the acks to send.
func checkTimerPop(status int, body []byte) ([]fireRec, []ackItem, verdict) {
	if status != http.StatusOK {
		return nil, nil, failed(fmt.Sprintf("pop HTTP %d", status), snippet(body))
	}
	var pr struct {
		Success  *bool        `json:"success"`
		Messages []popMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &pr); err != nil {
		return nil, nil, failed("pop bad body", err.Error()+": "+snippet(body))
	}
	if pr.Success != nil && !*pr.Success {
		return nil, nil, failed("pop success:false", snippet(body))
	}
	var v verdict
	fires := make([]fireRec, 0, len(pr.Messages))
	items := make([]ackItem, 0, len(pr.Messages))
	for _, m := range pr.Messages {
		if m.TransactionID == "" || m.PartitionID == "" || m.LeaseID == "" {
			v.bad++
			v.kind, v.detail = "pop message incomplete", fmt.Sprintf("%+v", m)
			continue
		}
		items = append(items, ackItem{m.TransactionID, m.PartitionID, m.LeaseID, "completed"})
		at, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil {
			v.bad++
			v.kind, v.detail = "pop message createdAt", fmt.Sprintf("%q: %v", m.CreatedAt, err)
			continue
		}
		v.good++
		fires = append(fires, fireRec{m.TransactionID, at})
	}
	return fires, items, v
}
