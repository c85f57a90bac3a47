package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// Timers (addendum §1, §2): scheduled messages, in a transaction's root
// `timers` array or on the standalone routes.

// Limits of the standalone routes (addendum §2); the transaction array has
// none of these beyond the body limit.
const (
	maxTimerOpsPerCall  = 256
	maxTimerHorizonMs   = 90 * 24 * 3600 * 1000
	maxTimerPayload     = 1 << 20
	maxTimerTxnBytes    = 65535
	maxTimerListLimit   = 1000
	maxTimerCountPrefix = 128
)

// serverOwnedTimerFields may never come from a client (addendum §1.2).
var serverOwnedTimerFields = map[string]bool{
	"producerSub": true, "producer_sub": true, "messageId": true, "message_id": true,
	"tenant": true, "tenantId": true, "tenant_id": true, "deliverAt": true, "deliver_at": true,
	"delaySeconds": true, "delay_seconds": true, "attempts": true, "claimToken": true,
	"claim_token": true, "claimedUntil": true,
}

func timersBad(reason, detail string) error {
	return &badRequest{status: http.StatusBadRequest, msg: "timers_bad_request", reason: reason, detail: detail}
}

// timerStrictness separates the standalone route's limits from the
// transaction's.
type timerStrictness struct{ standalone bool }

func parseTimerOps(raws []json.RawMessage, st timerStrictness) ([]*fsmpb.TimerOp, error) {
	if st.standalone && len(raws) > maxTimerOpsPerCall {
		return nil, timersBad("timers_too_many_ops", fmt.Sprintf("at most %d ops per call", maxTimerOpsPerCall))
	}
	seen := map[string]bool{}
	ops := make([]*fsmpb.TimerOp, 0, len(raws))
	for i, raw := range raws {
		o, ok := asObject(raw)
		if !ok {
			return nil, timersBad("timers_bad_op", fmt.Sprintf("op at index %d: must be an object", i))
		}
		op, err := parseTimerOp(i, o, st)
		if err != nil {
			return nil, err
		}
		k := op.Queue + "\x00" + op.TimerKey
		if seen[k] {
			return nil, timersBad("timers_bad_request", fmt.Sprintf("op at index %d: (%s, %s) appears twice in one call", i, op.Queue, op.TimerKey))
		}
		seen[k] = true
		ops = append(ops, op)
	}
	return ops, nil
}

func parseTimerOp(i int, o object, st timerStrictness) (*fsmpb.TimerOp, error) {
	at := fmt.Sprintf("op at index %d: ", i)
	for k := range o {
		if serverOwnedTimerFields[k] || strings.HasPrefix(k, "_") {
			return nil, &badRequest{status: http.StatusBadRequest, msg: "timers_server_owned_field",
				reason: "timers_server_owned_field", detail: at + k + " is set by the server"}
		}
	}
	name, _ := str(o["op"])
	op := &fsmpb.TimerOp{}
	switch name {
	case "schedule":
		op.Kind = fsmpb.TimerOp_SCHEDULE
	case "reschedule":
		op.Kind = fsmpb.TimerOp_RESCHEDULE
	case "cancel":
		op.Kind = fsmpb.TimerOp_CANCEL
	default:
		return nil, timersBad("timers_bad_op", at+`op must be "schedule", "reschedule" or "cancel"`)
	}
	var ok bool
	if op.Queue, ok = str(o["queue"]); !ok || op.Queue == "" {
		return nil, timersBad("timers_bad_queue", at+"queue must be a non-empty string")
	}
	if err := checkName("queue", op.Queue); err != nil {
		return nil, timersBad("timers_bad_queue", at+err.Error())
	}
	if op.TimerKey, ok = str(o["timerKey"]); !ok || op.TimerKey == "" {
		return nil, timersBad("timers_bad_key", at+"timerKey must be a non-empty string")
	}
	if err := checkName("timerKey", op.TimerKey); err != nil {
		return nil, timersBad("timers_bad_key", at+err.Error())
	}
	if raw, has := o["partition"]; has {
		if op.Partition, ok = str(raw); !ok || op.Partition == "" {
			return nil, timersBad("timers_bad_partition", at+"partition must be a non-empty string when present")
		}
		if err := checkName("partition", op.Partition); err != nil {
			return nil, timersBad("timers_bad_partition", at+err.Error())
		}
	}
	if raw := o["encrypted"]; present(raw) {
		if op.Encrypted, ok = flexBool(raw); !ok {
			return nil, timersBad("timers_bad_request", at+"encrypted must be a boolean")
		}
	}
	if op.Kind == fsmpb.TimerOp_CANCEL {
		if raw := o["txn"]; present(raw) {
			if op.Txn, ok = str(raw); !ok {
				return nil, timersBad("timers_bad_txn", at+"txn must be a string")
			}
		}
		return op, nil
	}
	ms, ok := number(o["delayMs"])
	if !ok || math.IsNaN(ms) || math.IsInf(ms, 0) {
		return nil, timersBad("timers_bad_delay", at+"delayMs must be a number of milliseconds")
	}
	if st.standalone && ms > maxTimerHorizonMs {
		return nil, &badRequest{status: http.StatusForbidden, msg: "timer_horizon_exceeded",
			detail: at + "delayMs is beyond the 90-day horizon"}
	}
	if ms > maxSeconds*1000 {
		return nil, timersBad("timers_bad_delay", at+"delayMs is too large")
	}
	op.DelayUs = int64(math.Round(ms * 1000))
	if op.Txn, ok = str(o["txn"]); !ok || op.Txn == "" || len(op.Txn) > maxTimerTxnBytes {
		return nil, timersBad("timers_bad_txn", at+"txn must be a non-empty string of at most 65535 bytes")
	}
	b64, ok := str(o["payload"])
	if !ok {
		return nil, timersBad("timers_bad_payload", at+"payload must be a base64 string")
	}
	body, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, timersBad("timers_bad_payload", at+"payload is not valid base64")
	}
	if raw := o["payloadZstd"]; present(raw) {
		z, ok := flexBool(raw)
		if !ok {
			return nil, timersBad("timers_bad_request", at+"payloadZstd must be a boolean")
		}
		if z {
			if body, err = unzstd(body); err != nil {
				return nil, timersBad("timers_bad_payload", at+"payload does not decompress: "+err.Error())
			}
		}
	}
	if st.standalone && len(body) > maxTimerPayload {
		return nil, &badRequest{status: http.StatusRequestEntityTooLarge, msg: "payload_too_large",
			detail: at + "the decoded payload is larger than 1 MiB"}
	}
	// Messages carry JSON; a body that is not JSON travels wrapped.
	if !json.Valid(body) {
		body, _ = json.Marshal(map[string]string{"_raw_b64": base64.StdEncoding.EncodeToString(body)})
	}
	op.Payload = body
	id := uuid.Must(uuid.NewV7())
	op.MessageId = id[:]
	return op, nil
}

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(64<<20))

func unzstd(b []byte) ([]byte, error) { return zstdDecoder.DecodeAll(b, nil) }

// flexBool reads a boolean, also in the string forms the 2.x edge accepts.
func flexBool(raw json.RawMessage) (bool, bool) {
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

func timerResultOut(r *fsmpb.TimerResult) map[string]any {
	out := map[string]any{"ok": r.Ok, "status": r.Status, "queue": r.Queue, "timerKey": r.TimerKey, "txn": nullable(r.Txn)}
	if r.Status == fsm.TimerScheduled || r.Status == fsm.TimerRescheduled {
		out["messageId"] = uuidString(r.MessageId)
		out["deliverAt"] = isoMicros(r.DeliverAtUs)
	}
	return out
}

// timersPost is POST /api/v1/timers.
func (a *API) timersPost(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	idem, handled := a.idempotency(w, r, body, a.renderTimers)
	if handled {
		return
	}
	var raws []json.RawMessage
	if firstByte(body) == '[' {
		if err := json.Unmarshal(body, &raws); err != nil {
			a.refuse(w, r, idem, bad("Invalid JSON: "+err.Error()))
			return
		}
	} else {
		o, err := parseObject(body)
		if err != nil {
			a.refuse(w, r, idem, err)
			return
		}
		var ok bool
		if raws, ok = array(o["operations"]); !ok {
			a.refuse(w, r, idem, timersBad("timers_bad_request", "operations must be an array"))
			return
		}
	}
	if len(raws) == 0 {
		a.refuse(w, r, idem, timersBad("timers_bad_request", "operations must not be empty"))
		return
	}
	ops, err := parseTimerOps(raws, timerStrictness{standalone: true})
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	res, ok := a.apply(w, r, idem, &fsmpb.Command{Body: &fsmpb.Command_Timers{Timers: &fsmpb.TimerBatch{Ops: ops}}}, a.renderTimers)
	if ok {
		a.renderTimers(w, res)
	}
}

func (a *API) renderTimers(w http.ResponseWriter, res proto.Message) {
	tr := res.(*fsmpb.TimerBatchResult)
	if tr.Reason == fsm.ReasonTimersDisabled {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "timer scheduling is paused by the operator (GET /api/v1/system/kv-timers)", Code: "timers_disabled"})
		return
	}
	out := make([]map[string]any, len(tr.Results))
	for i, r := range tr.Results {
		out[i] = timerResultOut(r)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

// timerDelete is DELETE /api/v1/timers/:queue/*timerKey: a cancel, never
// refused by the schedule switch.
func (a *API) timerDelete(w http.ResponseWriter, r *http.Request) {
	op := &fsmpb.TimerOp{Kind: fsmpb.TimerOp_CANCEL, Queue: r.PathValue("queue"), TimerKey: r.PathValue("timerKey"), Txn: r.URL.Query().Get("txn")}
	if op.Queue == "" || op.TimerKey == "" || checkName("queue", op.Queue) != nil || checkName("timerKey", op.TimerKey) != nil {
		writeDecodeError(w, timersBad("timers_bad_request", "queue and timerKey must be non-empty names"))
		return
	}
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_Timers{Timers: &fsmpb.TimerBatch{Ops: []*fsmpb.TimerOp{op}}}})
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, timerResultOut(res.(*fsmpb.TimerBatchResult).Results[0]))
}

func timerPeekOut(t *fsmpb.TimerRecord, withPayload bool) map[string]any {
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
	var t *fsmpb.TimerRecord
	if err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		t = rd.Timer(r.PathValue("queue"), r.PathValue("timerKey"))
		return nil
	}); err != nil {
		writeBackendError(w, err)
		return
	}
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
			writeDecodeError(w, timersBad("timers_count_page_parameters", "after and limit do not apply to mode=count"))
			return
		}
		prefix := q.Get("prefix")
		switch {
		case prefix == "":
			writeDecodeError(w, timersBad("timers_count_prefix_required", "mode=count needs a non-empty prefix"))
			return
		case strings.IndexByte(prefix, 0) >= 0:
			writeDecodeError(w, timersBad("timers_count_prefix_invalid", "prefix must not contain NUL"))
			return
		case len(prefix) > maxTimerCountPrefix:
			writeDecodeError(w, timersBad("timers_count_prefix_too_long", "prefix is longer than 128 bytes"))
			return
		}
		var n int
		if err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error { n = rd.TimerCount(queue, prefix); return nil }); err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"count": n})
		return
	default:
		writeDecodeError(w, timersBad("timers_read_mode_unknown", "mode must be list or count"))
		return
	}
	limit := int(queryInt(r, "limit", 100))
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxTimerListLimit)
	var rows []*fsmpb.TimerRecord
	var truncated bool
	if err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		rows, truncated = rd.Timers(queue, q.Get("after"), limit)
		return nil
	}); err != nil {
		writeBackendError(w, err)
		return
	}
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
