package httpapi

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// Timers (addendum §1, §2): scheduled messages, in a transaction's root
// `timers` array or on the standalone routes.

// decodeTimerOps checks each timer op's members' JSON types. The payload
// travels as base64 (of the message body's bytes, compressed when
// payloadZstd says so).
func decodeTimerOps(raws []jsontext.Value) ([]request.TimerOp, error) {
	return eachOp(raws, func(i int) error { return request.TimersBad("timers_bad_op", request.OpAt(i)+"must be an object") },
		decodeTimerOp)
}

func decodeTimerOp(i int, o object) (request.TimerOp, error) {
	at := request.OpAt(i)
	var op request.TimerOp
	for k := range o {
		op.Fields = append(op.Fields, k)
	}
	op.Op, _ = str(o["op"])
	var ok bool
	if raw := o["queue"]; present(raw) {
		if op.Queue, ok = str(raw); !ok {
			return op, request.TimersBad("timers_bad_queue", at+"queue must be a non-empty string")
		}
	}
	if raw := o["timerKey"]; present(raw) {
		if op.TimerKey, ok = str(raw); !ok {
			return op, request.TimersBad("timers_bad_key", at+"timerKey must be a non-empty string")
		}
	}
	if raw, has := o["partition"]; has {
		op.HasPartition = true
		if op.Partition, ok = str(raw); !ok {
			return op, request.TimersBad("timers_bad_partition", at+"partition must be a non-empty string when present")
		}
	}
	if raw := o["encrypted"]; present(raw) {
		if op.Encrypted, ok = flexBool(raw); !ok {
			return op, request.TimersBad("timers_bad_request", at+"encrypted must be a boolean")
		}
	}
	if raw := o["txn"]; present(raw) {
		if op.Txn, ok = str(raw); !ok {
			return op, request.TimersBad("timers_bad_txn", at+"txn must be a string")
		}
	}
	if op.Op == "cancel" {
		return op, nil
	}
	if raw := o["delayMs"]; present(raw) {
		if op.DelayMs, ok = number(raw); !ok {
			return op, request.TimersBad("timers_bad_delay", at+"delayMs must be a number of milliseconds")
		}
		op.HasDelay = true
	}
	if raw := o["payloadZstd"]; present(raw) {
		if op.PayloadZstd, ok = flexBool(raw); !ok {
			return op, request.TimersBad("timers_bad_request", at+"payloadZstd must be a boolean")
		}
	}
	if op.Op != "schedule" && op.Op != "reschedule" {
		return op, nil // request refuses the op
	}
	b64, ok := str(o["payload"])
	if !ok {
		return op, request.TimersBad("timers_payload_not_base64", at+"payload must be a base64 string")
	}
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return op, request.TimersBad("timers_payload_not_base64", at+"payload is not valid base64")
	}
	op.Payload = body
	return op, nil
}

// flexBool reads a boolean, also in the string forms the 2.x edge accepts.
func flexBool(raw jsontext.Value) (bool, bool) {
	if b, ok := boolean(raw); ok {
		return b, true
	}
	s, ok := str(raw)
	if !ok {
		return false, false
	}
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

func timerResultOut(r *command.TimerResult) map[string]any {
	out := map[string]any{"ok": r.Ok, "status": r.Status.Text(), "queue": r.Queue, "timerKey": r.TimerKey, "txn": nullable(r.Txn)}
	if r.Status == command.TimerResult_SCHEDULED || r.Status == command.TimerResult_RESCHEDULED {
		out["messageId"] = uuidString(r.MessageId)
		out["deliverAt"] = isoMicros(r.DeliverAtUs)
	}
	return out
}

// timersPost is POST /api/v1/timers: {"operations":[...]} or a bare array.
func (a *API) timersPost(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	decoded, err := decodeTimersBody(body)
	var ops []*command.TimerOp
	if err == nil {
		ops, err = request.TimerBatch(decoded)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	res, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: ops}}})
	if !ok {
		return
	}
	tr := res.(*command.TimerBatchResult)
	if e := request.TimersVerdict(tr); e != nil {
		writeError(w, e)
		return
	}
	out := make([]map[string]any, len(tr.Results))
	for i, r := range tr.Results {
		out[i] = timerResultOut(r)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func decodeTimersBody(body []byte) ([]request.TimerOp, error) {
	raws, err := opsOf(body, request.TimersBad("timers_bad_request", "operations must be an array"))
	if err != nil {
		return nil, err
	}
	return decodeTimerOps(raws)
}

// timerDelete is DELETE /api/v1/timers/:queue/*timerKey: a cancel, never
// refused by the schedule switch.
func (a *API) timerDelete(w http.ResponseWriter, r *http.Request) {
	op, err := request.TimerCancel(r.PathValue("queue"), r.PathValue("timerKey"), r.URL.Query().Get("txn"))
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: []*command.TimerOp{op}}}})
	if ok {
		writeJSON(w, http.StatusOK, timerResultOut(res.(*command.TimerBatchResult).Results[0]))
	}
}

func timerPeekOut(t *command.TimerRecord, withPayload bool) map[string]any {
	out := map[string]any{
		"found": true, "queue": t.Queue, "timerKey": t.TimerKey, "partition": t.Partition,
		"deliverAt": isoMicros(max(t.DeliverAtUs, t.BackoffUntilUs)), "txn": t.Txn,
		"messageId": uuidString(t.MessageId), "payloadZstd": false, "encrypted": t.Encrypted,
		"producerSub": nullable(t.ProducerSub), "attempts": t.Attempts, "lastError": nullable(t.LastError),
		"claimed": false, "createdAt": isoMicros(t.CreatedUs), "updatedAt": isoMicros(t.UpdatedUs),
	}
	if withPayload {
		out["payload"] = base64.StdEncoding.EncodeToString(t.Payload)
	}
	return out
}

// timerGet is GET /api/v1/timers/:queue/*timerKey: a peek, {"found":false}
// when there is no pending timer (never a 404).
func (a *API) timerGet(w http.ResponseWriter, r *http.Request) {
	res, err := a.query(r, &command.Query{Body: &command.Query_Timer{Timer: &command.TimerGet{
		Queue: r.PathValue("queue"), TimerKey: r.PathValue("timerKey")}}})
	if err != nil {
		writeError(w, err)
		return
	}
	t := res.GetTimer().GetTimer()
	if t == nil {
		writeJSON(w, http.StatusOK, map[string]any{"found": false})
		return
	}
	writeJSON(w, http.StatusOK, timerPeekOut(t, true))
}

// timerList is GET /api/v1/timers/:queue: a page of pending timers, or with
// ?mode=count&prefix= their number.
func (a *API) timerList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	queue := r.PathValue("queue")
	switch q.Get("mode") {
	case "", "list":
	case "count":
		if q.Has("after") || q.Has("limit") {
			writeError(w, request.TimersBad("timers_count_page_parameters", "after and limit do not apply to mode=count"))
			return
		}
		prefix := q.Get("prefix")
		if err := request.TimerCountPrefix(prefix); err != nil {
			writeError(w, err)
			return
		}
		res, err := a.query(r, &command.Query{Body: &command.Query_TimerCount{TimerCount: &command.TimerCount{
			Queue: queue, Prefix: prefix}}})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"count": res.GetTimerCount().GetCount()})
		return
	default:
		writeError(w, request.TimersBad("timers_read_mode_unknown", "mode must be list or count"))
		return
	}
	limit := request.TimerListLimit(queryInt(r, "limit", 0))
	res, err := a.query(r, &command.Query{Body: &command.Query_Timers{Timers: &command.TimerList{
		Queue: queue, After: q.Get("after"), Limit: int32(limit)}}})
	if err != nil {
		writeError(w, err)
		return
	}
	rows, truncated := res.GetTimers().GetTimers(), res.GetTimers().GetTruncated()
	out := make([]map[string]any, len(rows))
	for i, t := range rows {
		out[i] = timerPeekOut(t, false)
		delete(out[i], "found")
	}
	var next *string
	if truncated && len(rows) > 0 {
		next = &rows[len(rows)-1].TimerKey
	}
	writeJSON(w, http.StatusOK, map[string]any{"rows": out, "truncated": truncated, "nextAfter": next})
}
