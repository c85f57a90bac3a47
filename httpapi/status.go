package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
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
//
// The views, by file: status.go /status (and the queue filter every view
// takes); status_queues.go /status/queues and a queue's page;
// status_deadletters.go the dead letters' error signatures;
// analytics.go /status/analytics, /analytics/* and /status/buffers;
// analytics_window.go their time window and the sums of flow buckets.

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
