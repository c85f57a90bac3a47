package httpapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/request"
)

// Message inspection and deletion (spec §4.9), dead-letter replay and
// purge. (partitionId, transactionId) names a message by the one rule of
// queue.Reader.FindMessage; the write routes read it first, then propose
// the entry, which applies only if the message is still that one.

func payloadOut(p []byte) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(p)
}

func isoOrNil(us int64) any {
	if us == 0 {
		return nil
	}
	return isoMillis(us)
}

func messageRowOut(r fsm.MessageRow) map[string]any {
	m := r.Message
	return map[string]any{
		"id": uuidString(m.Id), "transactionId": m.TransactionId, "partitionId": uuidString(r.Partition.Id),
		"queuePath": r.Queue.Name + "/" + r.Partition.Name, "queue": r.Queue.Name, "partition": r.Partition.Name,
		"namespace": nullable(r.Queue.Namespace), "task": nullable(r.Queue.Task), "status": r.Status,
		"queueStatus": r.QueueStatus, "busStatus": map[string]any{"consumedBy": r.ConsumedBy, "totalGroups": r.TotalGroups},
		"traceId": nullable(m.TraceId), "producerSub": nullable(m.ProducerSub), "queuePriority": r.Queue.Options.GetPriority(),
		"createdAt": isoMillis(m.CreatedUs), "leaseExpiresAt": isoOrNil(r.LeaseExpiresUs),
	}
}

// GET /api/v1/messages
func (a *API) listMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns := q.Get("ns")
	if ns == "" {
		ns = q.Get("namespace") // Queen's own spelling
	}
	f, err := request.ListMessages(request.MessageQuery{Queue: q.Get("queue"), Partition: q.Get("partition"),
		Namespace: ns, Task: q.Get("task"), Status: q.Get("status"), From: q.Get("from"), To: q.Get("to"),
		Limit: queryInt(r, "limit", 0), Offset: queryInt(r, "offset", 0)}, a.b.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	if id := identityOf(r); id.Scoped() {
		f.Visible = id.Touches // a scoped token sees its own queues only
	}
	var rows []fsm.MessageRow
	var mode fsm.MessagesMode
	err = a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) (err error) {
		rows, mode, err = rd.ListMessages(f, a.b.Now())
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]map[string]any, len(rows))
	for i, row := range rows {
		out[i] = messageRowOut(row)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out,
		"mode":       map[string]any{"hasQueueMode": mode.HasQueueMode, "busGroupsCount": mode.BusGroups, "type": mode.Type()},
		"pagination": map[string]any{"limit": f.Limit, "offset": f.Offset}})
}

// inScope answers 403 when a scoped token names a partition of another
// queue (or one that does not exist: nothing is said about it).
func (a *API) partitionInScope(w http.ResponseWriter, r *http.Request, pid []byte) bool {
	if !identityOf(r).Scoped() {
		return true
	}
	if q, ok := a.b.PartitionQueue(r.Context(), pid); ok && auth.InScope(r.Context(), q) {
		return true
	}
	writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg})
	return false
}

// messageInScope reads the (partitionId, transactionId) of a message route
// and checks the caller's scope over its partition; ok=false: the answer
// is written.
func (a *API) messageInScope(w http.ResponseWriter, r *http.Request) (pid []byte, txn string, ok bool) {
	txn = r.PathValue("transactionId")
	pid, err := request.MessageRef(r.PathValue("partitionId"), txn)
	if err != nil {
		writeError(w, err)
		return nil, "", false
	}
	return pid, txn, a.partitionInScope(w, r, pid)
}

// GET /api/v1/messages/:partitionId/:transactionId
func (a *API) getMessage(w http.ResponseWriter, r *http.Request) {
	pid, txn, ok := a.messageInScope(w, r)
	if !ok {
		return
	}
	var d *fsm.MessageDetail
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) (err error) {
		d, err = rd.MessageDetail(pid, txn, a.b.Now())
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if d == nil {
		writeError(w, request.MessageNotFound())
		return
	}
	out := messageRowOut(d.MessageRow)
	out["payload"] = payloadOut(d.Message.Payload)
	out["errorMessage"], out["retryCount"] = nil, nil
	dls := make([]map[string]any, len(d.DeadLetters))
	for i, dl := range d.DeadLetters {
		if i == 0 {
			out["errorMessage"], out["retryCount"] = dl.Error, dl.RetryCount
		}
		dls[i] = map[string]any{"dlqId": queue.DeadLetterID(dl.RecordId), "consumerGroup": dl.ConsumerGroup,
			"errorMessage": dl.Error, "retryCount": dl.RetryCount, "failedAt": isoMillis(dl.FailedUs)}
	}
	out["deadLetters"] = dls
	out["queueConfig"] = optionsPick(d.Queue.Options, messageConfigOptions...)
	out["mode"] = map[string]any{"hasQueueMode": d.Mode.HasQueueMode, "busGroupsCount": d.Mode.BusGroups,
		"consumedByGroups": d.ConsumedBy, "type": d.Mode.Type()}
	groups := make([]map[string]any, len(d.Groups))
	for i, g := range d.Groups {
		groups[i] = map[string]any{"name": g.Name, "consumed": g.Consumed, "leaseExpiresAt": isoOrNil(g.LeaseExpiresUs)}
	}
	out["consumerGroups"] = groups
	writeJSON(w, http.StatusOK, out)
}

// findMessage reads which message (pid, txn) names, linearizably, for a
// write that acts on it: its seq (0 = none) and its partition's queue.
func (a *API) findMessage(r *http.Request, pid []byte, txn string) (uint64, string, error) {
	var seq uint64
	var q string
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		p, s := rd.FindMessage(pid, txn)
		if p != nil {
			q, seq = p.Queue, s
		}
		return nil
	})
	return seq, q, err
}

// DELETE /api/v1/messages/:partitionId/:transactionId
func (a *API) deleteMessage(w http.ResponseWriter, r *http.Request) {
	pid, txn, ok := a.messageInScope(w, r)
	if !ok {
		return
	}
	seq, _, err := a.findMessage(r, pid, txn)
	if err != nil {
		writeError(w, err)
		return
	}
	deleted := false
	if seq != 0 {
		res, ok := a.propose(w, r, nil, request.DeleteMessage(pid, seq, txn))
		if !ok {
			return
		}
		deleted = res.(*command.DeleteMessageResult).Deleted
	}
	msg := "Message not found"
	if deleted {
		msg = "Message deleted successfully"
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": deleted, "partitionId": r.PathValue("partitionId"),
		"transactionId": txn, "message": msg})
}

// destination reads a replay's optional body {"queue","partition"}.
func (a *API) destination(r *http.Request) (request.Destination, string, error) {
	var d request.Destination
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		return d, "", request.Bad("Could not read request body: " + err.Error())
	}
	if kindOf(body) == 0 {
		return d, "", nil
	}
	o, err := parseObject(body)
	if err != nil {
		return d, "", err
	}
	if d.Queue, err = optString(o["queue"], "queue must be a string"); err != nil {
		return d, "", err
	}
	if d.Partition, err = optString(o["partition"], "partition must be a string"); err != nil {
		return d, "", err
	}
	group, err := optString(o["consumerGroup"], "consumerGroup must be a string")
	return d, group, err
}

func replayOut(res *command.ReplayResult) map[string]any {
	out := map[string]any{"success": res.Verdict == command.ReplayResult_MOVED, "verdict": request.VerdictText(res.Verdict),
		"dlqId": queue.DeadLetterID(res.RecordId), "consumerGroup": res.ConsumerGroup, "queue": res.Queue,
		"partition": res.Partition, "partitionId": uuidString(res.PartitionId), "transactionId": res.TransactionId,
		"messageId": uuidString(res.MessageId), "offset": res.Offset}
	if res.Error != "" {
		out["error"] = res.Error
	}
	return out
}

func (a *API) proposeReplay(w http.ResponseWriter, r *http.Request, cmd *command.Command) {
	res, ok := a.propose(w, r, nil, cmd)
	if !ok {
		return
	}
	rr := res.(*command.ReplayResult)
	if e := request.ReplayVerdict(rr); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, replayOut(rr))
}

// POST /api/v1/dlq/:id/replay
func (a *API) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := request.DeadLetterID(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	to, _, err := a.destination(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var src string
	err = a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		if d := rd.Reader.DeadLetterByID(id); d != nil {
			src = d.Queue
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if src == "" {
		writeError(w, request.DeadLetterGone())
		return
	}
	cmd, err := request.ReplayByID(id, src, to)
	if err != nil {
		writeError(w, err)
		return
	}
	a.proposeReplay(w, r, cmd)
}

// POST /api/v1/messages/:partitionId/:transactionId/retry: replays that
// message's dead letter (the group named by ?consumerGroup= or the body,
// queue mode by default).
func (a *API) retryMessage(w http.ResponseWriter, r *http.Request) {
	txn := r.PathValue("transactionId")
	pid, err := request.MessageRef(r.PathValue("partitionId"), txn)
	if err != nil {
		writeError(w, err)
		return
	}
	to, group, err := a.destination(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if g := r.URL.Query().Get("consumerGroup"); g != "" {
		group = g
	}
	if err := request.CheckName("consumerGroup", group); err != nil {
		writeError(w, err)
		return
	}
	var rec *command.DLQRecord
	err = a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		rec = rd.Reader.DeadLetterOf(pid, txn, group)
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if rec == nil {
		writeError(w, request.DeadLetterGone())
		return
	}
	cmd, err := request.ReplayByID(rec.RecordId, rec.Queue, to)
	if err != nil {
		writeError(w, err)
		return
	}
	a.proposeReplay(w, r, cmd)
}

// DELETE /api/v1/dlq?queue=&consumerGroup=: one queue's dead letters (one
// group's when named), in entries of request.MaxPurgePerEntry.
func (a *API) purgeDLQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd, err := request.PurgeDLQ(q.Get("queue"), q.Get("consumerGroup"))
	if err != nil {
		writeError(w, err)
		return
	}
	var purged uint64
	for {
		res, ok := a.propose(w, r, nil, cmd)
		if !ok {
			return
		}
		pr := res.(*command.PurgeResult)
		purged += pr.Purged
		if !pr.More || pr.Purged == 0 {
			break
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "queue": q.Get("queue"),
		"consumerGroup": nullable(q.Get("consumerGroup")), "purged": purged})
}
