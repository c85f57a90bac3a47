package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/request"
)

// readLevel: reads are linearizable unless the client asks for a stale read
// with ?consistency=stale (DESIGN.md invariant 6).
func readLevel(r *http.Request) cluster.ReadLevel {
	if r.URL.Query().Get("consistency") == "stale" {
		return cluster.Stale
	}
	return cluster.Linearizable
}

// queueInScope answers 403 unless the request's token may see the named
// queue.
func queueInScope(w http.ResponseWriter, r *http.Request, name string) bool {
	if auth.InScope(r.Context(), name) {
		return true
	}
	writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg})
	return false
}

// statsOut is a queue's or a partition's counts (queue.Reader.Counts).
func statsOut(s fsm.PartitionStats) map[string]any {
	return map[string]any{"total": s.Total, "pending": s.Pending, "processing": s.Processing,
		"completed": s.Completed, "failed": s.Failed, "deadLetter": s.DeadLetter}
}

// queueOut is a queue as every view of it begins (id, name, namespace,
// task), with that view's fields.
func queueOut(q *command.QueueRecord, fields map[string]any) map[string]any {
	fields["id"], fields["name"], fields["namespace"], fields["task"] = uuidString(q.Id), q.Name, nullable(q.Namespace), nullable(q.Task)
	return fields
}

// partitionOut is a partition as the views of a queue's partitions begin
// (id, name, createdAt, oldestMessage), with that view's fields.
func partitionOut(rd *fsm.Reader, p *command.PartitionRecord, fields map[string]any) map[string]any {
	fields["id"], fields["name"], fields["createdAt"] = uuidString(p.Id), p.Name, isoMillis(p.CreatedUs)
	fields["oldestMessage"] = isoOrNil(rd.OldestCreatedUs(p))
	return fields
}

// writeQueueView answers a view of one queue: the read's error, 404 when
// the read found no queue (out is nil), or out.
func writeQueueView(w http.ResponseWriter, err error, out map[string]any) {
	if err != nil {
		writeError(w, err)
		return
	}
	if out == nil {
		notFound(w, "Queue not found")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) {
	var queues []map[string]any
	type row struct {
		created int64
		name    string
		out     map[string]any
	}
	var rows []row
	err := a.eachTenant(r, func(ctx context.Context, name string, every bool) error {
		return a.b.Read(ctx, readLevel(r), func(rd *fsm.Reader) error {
			now := a.b.Now()
			for _, q := range rd.Queues() {
				if !auth.InScope(r.Context(), q.Name) {
					continue // a scoped token sees its own queues only
				}
				c := rd.Counts(q, now)
				out := queueOut(q, map[string]any{
					"createdAt": isoMillis(q.CreatedUs), "partitions": len(c.Partitions),
					"messages": map[string]any{"total": c.Totals.Total, "pending": c.Totals.Pending, "processing": c.Totals.Processing},
				})
				if every {
					withTenant(out, name)
				}
				rows = append(rows, row{q.CreatedUs, q.Name, out})
			}
			return nil
		})
	})
	if err != nil {
		writeError(w, err)
		return
	}
	sort.SliceStable(rows, func(i, j int) bool { // newest first
		if rows[i].created != rows[j].created {
			return rows[i].created > rows[j].created
		}
		return rows[i].name < rows[j].name
	})
	queues = make([]map[string]any, len(rows))
	for i, rw := range rows {
		queues[i] = rw.out
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": queues})
}

func (a *API) getQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if !queueInScope(w, r, name) {
		return
	}
	var out map[string]any
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		q := rd.Queue(name)
		if q == nil {
			return nil
		}
		c := rd.Counts(q, a.b.Now())
		parts := []map[string]any{}
		for _, pc := range c.Partitions {
			p := pc.Partition
			newest := any(nil) // a partition that holds no message has no newest one
			if p.Count > 0 {
				newest = isoMillis(p.LastCreatedUs)
			}
			parts = append(parts, partitionOut(rd, p, map[string]any{"stats": statsOut(pc.Stats), "newestMessage": newest}))
		}
		out = queueOut(q, map[string]any{"createdAt": isoMillis(q.CreatedUs), "partitions": parts,
			"totals": statsOut(c.Totals), "options": optionsOut(q.Options)})
		return nil
	})
	writeQueueView(w, err, out)
}

func (a *API) deleteQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	in, err := request.DeleteQueue(name)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_DeleteQueue{DeleteQueue: in}})
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "queue": name, "existed": res.(*command.DeleteQueueResult).Existed})
}

// parseTime reads an ISO-8601 query value; 0 when absent or unreadable.
func parseTime(v string) int64 {
	us, _ := request.ParseTime(v)
	return us
}

func (a *API) dlq(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if id := identityOf(r); id.Scoped() && !id.Touches(q.Get("queue")) || id.Scoped() && q.Get("queue") == "" {
		writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg}) // a scoped token names its queue
		return
	}
	f := fsm.DLQFilter{
		Queue: q.Get("queue"), ConsumerGroup: q.Get("consumerGroup"), Partition: q.Get("partition"),
		FromUs: parseTime(q.Get("from")), ToUs: parseTime(q.Get("to")),
		Limit: int(queryInt(r, "limit", 100)), Offset: int(queryInt(r, "offset", 0)),
	}
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = 100
	}
	if f.Offset < 0 {
		f.Offset = 0
	}
	var recs []*command.DLQRecord
	var total int
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) (err error) {
		recs, total, err = rd.DeadLetters(f)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	msgs := make([]map[string]any, len(recs))
	for i, d := range recs {
		data := json.RawMessage(d.Payload)
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		msgs[i] = map[string]any{
			"id": uuidString(d.MessageId), "dlqId": queue.DeadLetterID(d.RecordId), "transactionId": d.TransactionId, "partitionId": uuidString(d.PartitionId),
			"queue": d.Queue, "partition": d.Partition, "consumerGroup": d.ConsumerGroup,
			"errorMessage": d.Error, "retryCount": d.RetryCount, "data": data,
			"producerSub": nullable(d.ProducerSub), "traceId": nullable(d.TraceId),
			"createdAt": isoMillis(d.CreatedUs), "failedAt": isoMillis(d.FailedUs),
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"messages": msgs, "total": total, "limit": f.Limit, "offset": f.Offset,
		"pagination": map[string]any{"limit": f.Limit, "offset": f.Offset},
	})
}

// queueDepth is GET /api/v1/resources/queues/:queue/depth[?group=]
// (addendum §8): what the queue holds for one group (default: queue mode).
func (a *API) queueDepth(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if !queueInScope(w, r, name) {
		return
	}
	var d fsm.Depth
	var found bool
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		d, found = rd.Depth(name, r.URL.Query().Get("group"), a.b.Now())
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if !found {
		notFound(w, "Queue not found")
		return
	}
	parts := make([]map[string]any, len(d.Partitions))
	for i, p := range d.Partitions {
		parts[i] = map[string]any{"partition": p.Partition, "pending": p.Pending, "processing": p.Processing, "ready": p.Ready,
			"conflatedDeliveryInProgress": p.ConflatedDeliveryInProgress}
	}
	var conflation any
	if d.Conflation != nil {
		conflation = *d.Conflation
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"queue": name, "group": orQueueMode(r.URL.Query().Get("group")), "pending": d.Pending, "partitionsPending": d.PartitionsPending,
		"conflation": conflation, "effectivePending": d.EffectivePending, "processing": d.Processing, "ready": d.Ready,
		"partitionsReady": d.PartitionsReady, "effectiveReady": d.EffectiveReady, "partitions": parts,
	})
}

func orQueueMode(group string) string {
	if group == "" {
		return command.QueueModeGroup
	}
	return group
}
