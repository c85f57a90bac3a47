package httpapi

import (
	"net/http"
	"sort"

	"github.com/queen-node/queen-node/fsm"
)

// The analytics views: GET /status/analytics, the /analytics/* series,
// and the routes of Queen's that have nothing to show here.

// GET /api/v1/status/analytics?interval=minute|hour|day&from&to&queue&namespace&task
func (a *API) statusAnalytics(w http.ResponseWriter, r *http.Request) {
	win := a.windowOf(r, "hour")
	f := newQueueFilter(r)
	now := a.b.Now()
	var out map[string]any
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		qs := f.load(rd)
		var current fsm.PartitionStats
		for _, q := range qs {
			current.Add(rd.Counts(q, now).Totals)
		}
		_, sigs, _ := deadLetterSummary(rd, f)
		series := rd.Flows(fsm.FlowQuery{FromUs: win.fromUs, ToUs: win.toUs, BucketUs: win.bucketUs, Queue: f.accepts})
		byStart := flowTotals(series)
		var all fsm.FlowCounts
		through, lag, errs, dlq := []map[string]any{}, []map[string]any{}, []map[string]any{}, []map[string]any{}
		for _, s := range win.starts() {
			c := byStart[s]
			if c == nil {
				c = &fsm.FlowCounts{}
			}
			all.Add(*c)
			ts := isoMillis(s)
			through = append(through, throughputRow(win, s, c))
			avg, mx := lagOut(*c)
			lag = append(lag, map[string]any{"timestamp": ts, "pops": c.Pops, "avgLagMs": avg, "maxLagMs": mx})
			errs = append(errs, map[string]any{"timestamp": ts, "failed": c.Failed, "processed": c.Consumed,
				"rate": rate(c.Failed, c.Failed+c.Consumed)})
			dlq = append(dlq, map[string]any{"timestamp": ts, "messages": c.DeadLettered})
		}
		byQueue := sumFlows(series, func(b fsm.FlowBucket) string { return b.Queue })
		top := []map[string]any{}
		for _, name := range sortedKeys(byQueue) {
			c := byQueue[name]
			ns := any(nil)
			if q := f.known[name]; q != nil {
				ns = nullable(q.Namespace)
			}
			top = append(top, map[string]any{"name": name, "namespace": ns, "messagesIngested": c.Pushed,
				"messagesProcessed": c.Consumed, "failed": c.Failed, "deadLettered": c.DeadLettered,
				"errorRate": rate(c.Failed, c.Failed+c.Consumed)})
		}
		sort.SliceStable(top, func(i, j int) bool {
			return top[i]["messagesProcessed"].(uint64) > top[j]["messagesProcessed"].(uint64)
		})
		secs := float64(win.toUs-win.fromUs) / 1e6
		avg, mx := lagOut(all)
		out = map[string]any{
			"timeRange": win.timeRange(),
			"throughput": map[string]any{"timeSeries": through, "totals": map[string]any{
				"ingested": all.Pushed, "processed": all.Consumed, "failed": all.Failed, "deadLettered": all.DeadLettered,
				"popped":               all.Popped,
				"avgIngestedPerSecond": round2(float64(all.Pushed) / secs), "avgProcessedPerSecond": round2(float64(all.Consumed) / secs)}},
			"latency":    map[string]any{"timeSeries": lag, "overall": map[string]any{"avgLagMs": avg, "maxLagMs": mx}, "note": "pop lag: how long the oldest message a pop delivered had waited"},
			"errorRates": map[string]any{"timeSeries": errs, "overall": map[string]any{"failed": all.Failed, "processed": all.Consumed, "rate": rate(all.Failed, all.Failed+all.Consumed)}},
			"queueDepths": map[string]any{"timeSeries": []any{}, "current": map[string]any{"pending": current.Pending,
				"processing": current.Processing}},
			"topQueues":       top,
			"deadLetterQueue": map[string]any{"timeSeries": dlq, "total": current.DeadLetter, "topErrors": sigs},
			"counts":          a.countsOut(series.SinceUs),
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// flowSeriesOf reads the flow counts an /analytics request asks for
// (from, to, queue; buckets of a minute up to a 2-hour range, 5 minutes up
// to a day, an hour beyond).
func (a *API) flowSeriesOf(w http.ResponseWriter, r *http.Request) (window, fsm.FlowSeries, bool) {
	win := a.windowOf(r, "minute")
	switch span := win.toUs - win.fromUs; {
	case span <= 2*hourUs:
		win.bucketUs, win.interval = minuteUs, "minute"
	case span <= dayUs:
		win.bucketUs, win.interval = 5*minuteUs, "5 minutes"
	default:
		win.bucketUs, win.interval = hourUs, "hour"
	}
	for (win.toUs-win.fromUs)/win.bucketUs > maxBuckets {
		win.bucketUs *= 2
	}
	f := newQueueFilter(r)
	var s fsm.FlowSeries
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		f.load(rd)
		s = rd.Flows(fsm.FlowQuery{FromUs: win.fromUs, ToUs: win.toUs, BucketUs: win.bucketUs, Queue: f.accepts})
		return nil
	})
	if err != nil {
		writeError(w, err)
		return win, s, false
	}
	return win, s, true
}

// GET /api/v1/analytics/queue-lag?from&to&queue: a bare array, newest
// bucket first, of pops and their lag per queue.
func (a *API) analyticsQueueLag(w http.ResponseWriter, r *http.Request) {
	win, s, ok := a.flowSeriesOf(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for i := len(s.Buckets) - 1; i >= 0; i-- {
		b := s.Buckets[i]
		if b.Pops == 0 {
			continue
		}
		avg, mx := lagOut(b.FlowCounts)
		out = append(out, map[string]any{"queueName": b.Queue, "popCount": b.Popped, "claims": b.Pops,
			"avgLagMs": avg, "maxLagMs": mx, "bucketMinutes": win.bucketUs / minuteUs, "bucketTime": isoMillis(b.StartUs)})
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /api/v1/analytics/queue-ops?from&to&queue: per bucket and queue,
// pushes, pops and acks.
func (a *API) analyticsQueueOps(w http.ResponseWriter, r *http.Request) {
	win, s, ok := a.flowSeriesOf(w, r)
	if !ok {
		return
	}
	series := []map[string]any{}
	names := map[string]bool{}
	for _, b := range s.Buckets {
		if b.Pushed+b.Popped+b.Consumed+b.Failed+b.DeadLettered == 0 {
			continue
		}
		names[b.Queue] = true
		avg, mx := lagOut(b.FlowCounts)
		series = append(series, map[string]any{"bucket": isoMillis(b.StartUs), "queueName": b.Queue,
			"pushMessages": b.Pushed, "popMessages": b.Popped, "ackSuccess": b.Consumed, "ackFailed": b.Failed,
			"deadLettered": b.DeadLettered, "avgLagMs": avg, "maxLagMs": mx,
			"pushPerSecond": win.perSecond(b.Pushed), "popPerSecond": win.perSecond(b.Popped),
			"ackPerSecond": win.perSecond(b.Consumed + b.Failed)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"timeRange": win.timeRange(), "bucketMinutes": win.bucketUs / minuteUs,
		"series": series, "queues": sortedKeys(names), "counts": a.countsOut(s.SinceUs)})
}

// GET /api/v1/analytics/retention?from&to&queue: what retention removed,
// per bucket (every queue together) and in total.
func (a *API) analyticsRetention(w http.ResponseWriter, r *http.Request) {
	win, s, ok := a.flowSeriesOf(w, r)
	if !ok {
		return
	}
	out := func(c fsm.FlowCounts) map[string]any {
		return map[string]any{"retentionMsgs": c.Retention, "completedRetentionMsgs": c.Completed,
			"evictionMsgs": c.Evicted, "deadLetterMsgs": c.DeadLettersExpired, "partitionsRemoved": c.PartitionsRemoved,
			"totalMsgs": c.Retention + c.Completed + c.Evicted, "eventCount": c.Retains}
	}
	byStart := flowTotals(s)
	var total fsm.FlowCounts
	series := []map[string]any{}
	for _, start := range sortedKeys(byStart) {
		c := byStart[start]
		if c.Retains == 0 {
			continue
		}
		total.Add(*c)
		row := out(*c)
		row["bucket"] = isoMillis(start)
		series = append(series, row)
	}
	writeJSON(w, http.StatusOK, map[string]any{"timeRange": win.timeRange(), "bucketMinutes": win.bucketUs / minuteUs,
		"series": series, "totals": out(total), "counts": a.countsOut(s.SinceUs)})
}

// GET /api/v1/analytics/system-metrics: every node's process and Raft
// figures now, as each node reports them (a point per node; nodes keep no
// history of these).
func (a *API) analyticsSystemMetrics(w http.ResponseWriter, r *http.Request) {
	win := a.windowOf(r, "minute")
	nodes := a.probeNodes(r.Context(), true)
	series := []map[string]any{}
	replicas := []map[string]any{}
	for _, n := range nodes {
		replicas = append(replicas, map[string]any{"hostname": n.ID, "reachable": n.Reachable})
		if !n.Reachable {
			continue
		}
		series = append(series, map[string]any{"bucket": isoMillis(a.b.Now()), "hostname": n.ID,
			"metrics": map[string]any{"uptimeSeconds": n.Uptime, "heapBytes": n.HeapBytes, "goroutines": n.Goroutines,
				"requests": n.Requests, "role": n.Role, "term": n.Term, "applied": n.Applied, "commit": n.Commit, "lag": n.Lag,
				"inFlight": n.InFlight, "diskFreeBytes": n.DiskFree}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"timeRange": win.timeRange(), "series": series, "replicas": replicas})
}

// The analytics of Queen's PostgreSQL workers and buffers have nothing to
// show here: the routes answer their top-level keys, empty (README).
func (a *API) analyticsWorkerMetrics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"timeRange": a.windowOf(r, "minute").timeRange(), "series": []any{}, "workers": []any{},
		"note": "queen-node has no worker pool: each node applies the Raft log in one goroutine"})
}

func (a *API) analyticsParkedReplicas(w http.ResponseWriter, r *http.Request) {
	win := a.windowOf(r, "minute")
	writeJSON(w, http.StatusOK, map[string]any{"timeRange": win.timeRange(), "bucketMinutes": win.bucketUs / minuteUs,
		"series": []any{}, "replicas": []any{}, "note": "not recorded by queen-node"})
}

func (a *API) analyticsPostgresStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"database": map[string]any{}, "tables": []any{}, "indexes": []any{},
		"connections": map[string]any{}, "note": "queen-node keeps its state in a Raft log and bbolt, not PostgreSQL"})
}

func (a *API) statusBuffers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"buffers": []any{}, "qos0": map[string]any{}, "failover": map[string]any{},
		"note": "queen-node keeps no file buffers: a push is answered once its entry is committed"})
}
