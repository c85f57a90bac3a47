package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/request"
)

// Traces (spec §4.15): one entry per recorded event; the views read them
// by message, by name, and the names with their counts.

func decodeTrace(o object) (request.Trace, error) {
	var in request.Trace
	if s, ok := str(o["transactionId"]); ok {
		in.TransactionID = &s
	}
	if s, ok := str(o["partitionId"]); ok {
		in.PartitionID = &s
	}
	var err error
	if in.ConsumerGroup, err = optString(o["consumerGroup"], "consumerGroup must be a string"); err != nil {
		return in, err
	}
	if in.EventType, err = optString(o["eventType"], "eventType must be a string"); err != nil {
		return in, err
	}
	if in.WorkerID, err = optString(o["workerId"], "workerId must be a string"); err != nil {
		return in, err
	}
	if raw := o["traceNames"]; present(raw) {
		if s, ok := str(raw); ok {
			in.TraceNames = []string{s}
		} else if elems, ok := array(raw); ok {
			for _, e := range elems {
				s, ok := str(e)
				if !ok {
					return in, request.Bad("traceNames must be a string or an array of strings")
				}
				in.TraceNames = append(in.TraceNames, s)
			}
		} else {
			return in, request.Bad("traceNames must be a string or an array of strings")
		}
	}
	if raw, has := o["data"]; has {
		in.Data = []byte(raw) // null is data too: only a missing member is refused
	}
	return in, nil
}

// POST /api/v1/traces
func (a *API) recordTrace(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	in, err := decodeTrace(o)
	if err != nil {
		writeError(w, err)
		return
	}
	pid, err := request.TraceRef(in)
	if err == nil && in.Data == nil {
		err = request.Bad("data is required")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if !a.partitionInScope(w, r, pid) {
		return
	}
	seq, _, err := a.findMessage(r, pid, *in.TransactionID)
	if err != nil {
		writeError(w, err)
		return
	}
	if seq == 0 {
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "Message not found"})
		return
	}
	cmd, err := request.RecordTrace(in, pid, seq)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, cmd)
	if !ok {
		return
	}
	tr := res.(*command.TraceResult)
	if !tr.Found { // deleted or removed between the read and the entry
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "Message not found"})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"success": true, "traceId": uuidString(tr.TraceId)})
}

func traceOut(t *command.TraceRecord) map[string]any {
	names := t.TraceNames
	if names == nil {
		names = []string{}
	}
	return map[string]any{"id": uuidString(t.Id), "event_type": t.EventType, "data": payloadOut(t.Data),
		"consumer_group": nullable(t.ConsumerGroup), "worker_id": nullable(t.WorkerId),
		"created_at": isoMillis(t.CreatedUs), "trace_names": names}
}

// GET /api/v1/traces/:partitionId/:transactionId: the traces of the
// message the pair names (none when it names none).
func (a *API) messageTraces(w http.ResponseWriter, r *http.Request) {
	pid, txn, ok := a.messageInScope(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		if p, seq := rd.FindMessage(pid, txn); seq != 0 {
			for _, t := range rd.Traces(p.Id, seq) {
				out = append(out, traceOut(t))
			}
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out})
}

// GET /api/v1/traces/by-name/:name
func (a *API) tracesByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := request.TraceName(name); err != nil {
		writeError(w, err)
		return
	}
	limit, offset := request.Page(queryInt(r, "limit", 0), queryInt(r, "offset", 0), request.DefaultTraceList)
	var visible func(string) bool
	if id := identityOf(r); id.Scoped() {
		visible = id.Touches
	}
	var rows []fsm.TraceWithMessage
	var total int
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) (err error) {
		rows, total, err = rd.TracesByName(name, visible, offset, limit)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]map[string]any, len(rows))
	for i, t := range rows {
		m := traceOut(t.TraceRecord)
		m["transaction_id"], m["partition_id"] = t.TransactionId, uuidString(t.PartitionId)
		m["queue_name"], m["partition_name"] = t.Queue, t.Partition
		m["message_payload"] = payloadOut(t.Payload)
		out[i] = m
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out, "total": total,
		"pagination": map[string]any{"limit": limit, "offset": offset}})
}

// GET /api/v1/traces/names
func (a *API) traceNames(w http.ResponseWriter, r *http.Request) {
	limit, offset := request.Page(queryInt(r, "limit", 0), queryInt(r, "offset", 0), request.DefaultTraceNames)
	var visible func(string) bool
	if id := identityOf(r); id.Scoped() {
		visible = id.Touches
	}
	var out []map[string]any
	total := 0
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		names := rd.TraceNames(visible)
		total = len(names)
		for i := offset; i < len(names) && len(out) < limit; i++ {
			n := names[i]
			out = append(out, map[string]any{"trace_name": n.Name, "trace_count": n.Traces,
				"message_count": n.Messages, "last_seen": isoMillis(n.LastSeenUs)})
		}
		return nil
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"names": out, "total": total,
		"pagination": map[string]any{"limit": limit, "offset": offset}})
}
