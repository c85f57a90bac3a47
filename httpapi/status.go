package httpapi

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
)

// Status and analytics (spec §4.12): read-only views for the dashboard.
// None of them writes an entry. Where a number comes from:
//
//   - the replicated state (read linearizably unless ?consistency=stale):
//     queues, partitions, message counts, leases, consumer groups, dead
//     letters and their error signatures. Every node answers the same.
//   - the serving node's flow counts (fsm.Flows): per-interval pushed,
//     popped, consumed, failed and dead-lettered messages, pop lag and
//     retention removals. Each node counts the entries it applies, in the
//     minute of each entry's own time, so nodes that applied the same
//     entries agree; a node counts only since it started (or installed a
//     snapshot), which every answer's "counts.since" says.
//   - each node about itself (the cluster object of /status and
//     /analytics/system-metrics): role, term, applied and commit index as
//     that node's /health tells them, asked by the serving node.
//
// Times in series are bucket starts, oldest first.

const (
	minuteUs = int64(60 * 1e6)
	hourUs   = 60 * minuteUs
	dayUs    = 24 * hourUs
	// maxBuckets bounds a series' length; a longer range gets wider buckets.
	maxBuckets = 1500
	// maxSignatureScan bounds the dead letters read for error signatures
	// (the newest ones).
	maxSignatureScan = 10000
)

// window is an analytics request's time range and bucket width.
type window struct {
	fromUs, toUs, bucketUs int64
	interval               string
}

// windowOf reads from, to and interval (minute | hour | day); the default
// range is the last hour for minutes and the last day otherwise.
func (a *API) windowOf(r *http.Request, defInterval string) window {
	q := r.URL.Query()
	w := window{interval: q.Get("interval")}
	switch w.interval {
	case "minute", "hour", "day":
	default:
		w.interval = defInterval
	}
	span := map[string]int64{"minute": minuteUs, "hour": hourUs, "day": dayUs}
	w.bucketUs = span[w.interval]
	now := a.b.Now()
	w.toUs = parseTime(q.Get("to"))
	if w.toUs == 0 {
		w.toUs = now
	}
	w.fromUs = parseTime(q.Get("from"))
	if w.fromUs == 0 || w.fromUs >= w.toUs {
		def := hourUs
		if w.interval != "minute" {
			def = dayUs
		}
		w.fromUs = w.toUs - def
	}
	for (w.toUs-w.fromUs)/w.bucketUs > maxBuckets {
		w.bucketUs *= 2
	}
	return w
}

func (w window) timeRange() map[string]any {
	return map[string]any{"from": isoMillis(w.fromUs), "to": isoMillis(w.toUs), "interval": w.interval,
		"bucketMinutes": w.bucketUs / minuteUs}
}

// starts lists the bucket starts of the window, oldest first.
func (w window) starts() []int64 {
	var out []int64
	for s := w.fromUs - w.fromUs%w.bucketUs; s < w.toUs; s += w.bucketUs {
		out = append(out, s)
	}
	return out
}

func (w window) perSecond(n uint64) float64 {
	return round2(float64(n) / (float64(w.bucketUs) / 1e6))
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// queueFilter is the queues a status request covers: in the token's scope
// and, when given, of that name, namespace and task.
type queueFilter struct {
	r                     *http.Request
	name, namespace, task string
	known                 map[string]*command.QueueRecord
}

func newQueueFilter(r *http.Request) *queueFilter {
	q := r.URL.Query()
	return &queueFilter{r: r, name: q.Get("queue"), namespace: q.Get("namespace"), task: q.Get("task")}
}

// load notes the queues that exist (for the namespace and task filters).
func (f *queueFilter) load(rd *fsm.Reader) []*command.QueueRecord {
	qs := rd.Queues()
	f.known = map[string]*command.QueueRecord{}
	var out []*command.QueueRecord
	for _, q := range qs {
		f.known[q.Name] = q
		if f.accepts(q.Name) {
			out = append(out, q)
		}
	}
	return out
}

func (f *queueFilter) accepts(name string) bool {
	if !auth.InScope(f.r.Context(), name) || (f.name != "" && name != f.name) {
		return false
	}
	if f.namespace == "" && f.task == "" {
		return true
	}
	q := f.known[name]
	return q != nil && (f.namespace == "" || q.Namespace == f.namespace) && (f.task == "" || q.Task == f.task)
}

// countsOut says where the numbers of an answer come from.
func (a *API) countsOut(since int64) map[string]any {
	var s any
	if since != 0 {
		s = isoMillis(since)
	}
	return map[string]any{
		"countedBy":  a.b.ID(),
		"since":      s,
		"replicated": []string{"queues", "messages", "leases", "consumerGroups", "deadLetterQueue.totalMessages", "deadLetterQueue.topErrors", "queueDepths.current"},
		"node":       []string{"throughput", "lag", "errorRates", "deadLetterQueue.timeSeries", "retention"},
	}
}

// flowTotals sums a series by bucket start (all queues together).
func flowTotals(s fsm.FlowSeries) map[int64]*fsm.FlowCounts {
	return sumFlows(s, func(b fsm.FlowBucket) int64 { return b.StartUs })
}

// sumFlows sums a series' buckets by key.
func sumFlows[K comparable](s fsm.FlowSeries, key func(fsm.FlowBucket) K) map[K]*fsm.FlowCounts {
	out := map[K]*fsm.FlowCounts{}
	for _, b := range s.Buckets {
		c := out[key(b)]
		if c == nil {
			c = &fsm.FlowCounts{}
			out[key(b)] = c
		}
		c.Add(b.FlowCounts)
	}
	return out
}

// throughputRow is one bucket of a throughput series.
func throughputRow(win window, start int64, c *fsm.FlowCounts) map[string]any {
	return map[string]any{"timestamp": isoMillis(start), "ingested": c.Pushed, "processed": c.Consumed,
		"failed": c.Failed, "deadLettered": c.DeadLettered, "popped": c.Popped,
		"ingestedPerSecond": win.perSecond(c.Pushed), "processedPerSecond": win.perSecond(c.Consumed)}
}

func lagOut(c fsm.FlowCounts) (avg, maxLag any) {
	if c.Pops == 0 {
		return nil, nil
	}
	return c.LagSumUs / int64(c.Pops) / 1000, c.LagMaxUs / 1000
}

// signature is an error text with its variable parts (ids, numbers)
// replaced, so that errors of one cause group together.
var (
	sigUUID   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	sigHex    = regexp.MustCompile(`\b[0-9a-fA-F]{12,}\b`)
	sigNumber = regexp.MustCompile(`\d+(\.\d+)?`)
	sigSpace  = regexp.MustCompile(`\s+`)
)

// ErrorSignature is the group an error text falls in (exported for the
// dashboard's tests).
func ErrorSignature(text string) string {
	s := sigUUID.ReplaceAllString(text, "<id>")
	s = sigHex.ReplaceAllString(s, "<hex>")
	s = sigNumber.ReplaceAllString(s, "<n>")
	s = strings.TrimSpace(sigSpace.ReplaceAllString(s, " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

type signatureRow struct {
	sig, example string
	count        int
	queues       map[string]bool
	groups       map[string]bool
	newestUs     int64
}

// signatures groups dead letters (newest first) by error signature, the
// largest group first.
func signatures(recs []*command.DLQRecord) []map[string]any {
	by := map[string]*signatureRow{}
	for _, d := range recs {
		text := d.Error
		sig := ErrorSignature(text)
		row := by[sig]
		if row == nil {
			row = &signatureRow{sig: sig, example: text, queues: map[string]bool{}, groups: map[string]bool{}}
			by[sig] = row
		}
		row.count++
		row.queues[d.Queue] = true
		row.groups[d.ConsumerGroup] = true
		row.newestUs = max(row.newestUs, d.FailedUs)
	}
	rows := make([]*signatureRow, 0, len(by))
	for _, r := range by {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].count != rows[j].count {
			return rows[i].count > rows[j].count
		}
		return rows[i].sig < rows[j].sig
	})
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = map[string]any{"signature": r.sig, "error": r.example, "count": r.count,
			"queues": sortedKeys(r.queues), "consumerGroups": sortedKeys(r.groups), "lastFailedAt": isoMillis(r.newestUs)}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// deadLetterSummary reads the newest dead letters of the filtered queues:
// how many partitions they are in, and their error signatures. (How many
// there are in all is the queues' counts', queue.Reader.Counts.)
func deadLetterSummary(rd *fsm.Reader, f *queueFilter) (partitions int, sigs []map[string]any, scanned int) {
	recs, _ := rd.Reader.DeadLetters(queue.DLQFilter{Queue: f.name, Limit: maxSignatureScan})
	parts := map[string]bool{}
	var kept []*command.DLQRecord
	for _, d := range recs {
		if f.accepts(d.Queue) {
			kept = append(kept, d)
			parts[string(d.PartitionId)] = true
		}
	}
	return len(parts), signatures(kept), len(recs)
}

// GET /api/v1/status?from&to&queue&namespace&task: the landing page in one
// call: the cluster, the messages, leases, lagging groups, dead letters
// and the last hour's throughput.
func (a *API) status(w http.ResponseWriter, r *http.Request) {
	win := a.windowOf(r, "minute")
	win.interval, win.bucketUs = "minute", minuteUs
	for (win.toUs-win.fromUs)/win.bucketUs > maxBuckets {
		win.bucketUs *= 2
	}
	f := newQueueFilter(r)
	now := a.b.Now()
	var out map[string]any
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		qs := f.load(rd)
		var totals fsm.PartitionStats
		queues := make([]map[string]any, 0, len(qs))
		parts := 0
		for _, q := range qs {
			c := rd.Counts(q, now)
			totals.Add(c.Totals)
			parts += len(c.Partitions)
			queues = append(queues, queueOut(q, map[string]any{"partitions": len(c.Partitions), "messages": statsOut(c.Totals)}))
		}
		var active, leasedParts int
		var lagging []map[string]any
		groups := 0
		for _, gq := range rd.ConsumerGroups("", now) {
			if !f.accepts(gq.Queue) {
				continue
			}
			groups++
			var pending uint64
			var maxLag int64
			for _, p := range gq.Partitions {
				if p.Lease != nil {
					active++
					leasedParts++
				}
				pending += p.Pending
				maxLag = max(maxLag, p.LagUs(now))
			}
			if maxLag > laggingAfterUs {
				lagging = append(lagging, map[string]any{"consumerGroup": gq.Group, "queueName": gq.Queue,
					"pendingMessages": pending, "maxTimeLag": maxLag / 1e6})
			}
		}
		dlqParts, sigs, scanned := deadLetterSummary(rd, f)
		series := rd.Flows(fsm.FlowQuery{FromUs: win.fromUs, ToUs: win.toUs, BucketUs: win.bucketUs, Queue: f.accepts})
		byStart := flowTotals(series)
		throughput := []map[string]any{}
		for _, s := range win.starts() {
			c := byStart[s]
			if c == nil {
				c = &fsm.FlowCounts{}
			}
			throughput = append(throughput, throughputRow(win, s, c))
		}
		if lagging == nil {
			lagging = []map[string]any{}
		}
		out = map[string]any{
			"timeRange":  win.timeRange(),
			"throughput": throughput,
			"queues":     queues,
			"messages":   statsOut(totals),
			"partitions": parts,
			"leases":     map[string]any{"active": active, "partitionsWithLeases": leasedParts},
			"consumerGroups": map[string]any{"total": groups, "lagging": lagging,
				"laggingAfterSeconds": laggingAfterUs / 1e6},
			"deadLetterQueue": map[string]any{"totalMessages": totals.DeadLetter, "affectedPartitions": dlqParts,
				"topErrors": sigs, "scanned": scanned},
			"counts": a.countsOut(series.SinceUs),
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out["cluster"] = a.clusterStatus(r.Context())
	out["node"] = map[string]any{"id": a.b.ID(), "role": a.b.Status().Role, "version": a.cfg.Version}
	writeJSON(w, http.StatusOK, out)
}

// oldestPending is, by queue, the creation time of the oldest message some
// group has not consumed.
func oldestPending(rd *fsm.Reader, now int64) map[string]int64 {
	out := map[string]int64{}
	for _, gq := range rd.ConsumerGroups("", now) {
		for _, p := range gq.Partitions {
			if o := out[gq.Queue]; p.OldestPendingUs != 0 && (o == 0 || p.OldestPendingUs < o) {
				out[gq.Queue] = p.OldestPendingUs
			}
		}
	}
	return out
}

// queueRow is a queue of the status list: resources' row plus what every
// counter of the state says, and how long its oldest pending message
// (for any group) has waited.
func queueRow(rd *fsm.Reader, q *command.QueueRecord, oldest, now int64) map[string]any {
	c := rd.Counts(q, now)
	var lag int64
	if oldest != 0 && now > oldest {
		lag = (now - oldest) / 1e6
	}
	return queueOut(q, map[string]any{"priority": q.Options.GetPriority(), "createdAt": isoMillis(q.CreatedUs),
		"partitions": len(c.Partitions), "messages": statsOut(c.Totals), "lag": map[string]any{"seconds": lag}})
}

// GET /api/v1/status/queues?limit=100&offset=0&namespace&task
func (a *API) statusQueues(w http.ResponseWriter, r *http.Request) {
	limit := int(min(max(queryInt(r, "limit", 100), 1), 1000))
	offset := int(max(queryInt(r, "offset", 0), 0))
	f := newQueueFilter(r)
	f.name = "" // the list is of every queue
	now := a.b.Now()
	rows := []map[string]any{}
	total := 0
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		qs := f.load(rd)
		sort.SliceStable(qs, func(i, j int) bool {
			if pi, pj := qs[i].Options.GetPriority(), qs[j].Options.GetPriority(); pi != pj {
				return pi > pj
			}
			return qs[i].Name < qs[j].Name
		})
		total = len(qs)
		oldest := oldestPending(rd, now)
		for i := offset; i < len(qs) && i < offset+limit; i++ {
			rows = append(rows, queueRow(rd, qs[i], oldest[qs[i].Name], now))
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": rows,
		"pagination": map[string]any{"limit": limit, "offset": offset, "total": total}})
}

// GET /api/v1/status/queues/:queue[?includePartitions=false]
func (a *API) statusQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if !auth.InScope(r.Context(), name) {
		writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg})
		return
	}
	withParts := r.URL.Query().Get("includePartitions") != "false" && r.URL.Query().Get("includePartitions") != "0"
	now := a.b.Now()
	var out map[string]any
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		q := rd.Queue(name)
		if q == nil {
			return nil
		}
		o := q.Options
		c := rd.Counts(q, now)
		parts := []map[string]any{}
		leases := map[string]int{} // partition id → live leases
		for _, gq := range rd.ConsumerGroups("", now) {
			if gq.Queue == name {
				for _, p := range gq.Partitions {
					if p.Lease != nil {
						leases[string(p.PartitionID)]++
					}
				}
			}
		}
		for _, pc := range c.Partitions {
			if !withParts {
				break
			}
			p := pc.Partition
			// newestMessage is the last push's time, also once the partition
			// holds nothing (resources' detail says null then).
			parts = append(parts, partitionOut(rd, p, map[string]any{"messages": statsOut(pc.Stats), "activeLeases": leases[string(p.Id)],
				"lastActivity": isoOrNil(p.LastCreatedUs), "newestMessage": isoOrNil(p.LastCreatedUs)}))
		}
		out = map[string]any{
			"queue": queueOut(q, map[string]any{"priority": o.GetPriority(), "createdAt": isoMillis(q.CreatedUs),
				"config": optionsPick(o, statusConfigOptions...), "options": optionsOut(o)}),
			"partitions": parts,
			"totals":     map[string]any{"messages": statsOut(c.Totals), "partitions": len(c.Partitions)},
		}
		return nil
	})
	writeQueueView(w, err, out)
}

// GET /api/v1/status/queues/:queue/messages?limit=50&offset=0&status&partition&from&to:
// the message list of one queue (GET /api/v1/messages with queue= set).
func (a *API) statusQueueMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Set("queue", r.PathValue("queue"))
	if q.Get("limit") == "" {
		q.Set("limit", "50")
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	if !auth.InScope(r.Context(), r.PathValue("queue")) {
		writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg})
		return
	}
	a.listMessages(w, r2)
}

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
		for _, name := range sortedKeysOf(byQueue) {
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

func rate(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return round2(float64(part) * 100 / float64(whole))
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
	for _, start := range sortedStarts(byStart) {
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

func sortedStarts(m map[int64]*fsm.FlowCounts) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
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
