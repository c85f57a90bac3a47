package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/kvstore"
)

// kvBatch is POST /api/v1/kv: {"operations":[...]} or a bare array. A call
// of reads only is a linearizable read; a call with any write is one entry.
func (a *API) kvBatch(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	idem, handled := a.idempotency(w, r, body, a.renderKVBatch)
	if handled {
		return
	}
	ops, err := parseKVBody(body)
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if !hasWrites(ops) {
		// Reads are safe to repeat: nothing to store under a key.
		if !a.allowKVRead(w) {
			return
		}
		res, ok := a.readKV(w, r, ops)
		if ok {
			a.renderKVBatch(w, res)
		}
		return
	}
	res, ok := a.apply(w, r, idem, &fsmpb.Command{Body: &fsmpb.Command_Kv{Kv: &fsmpb.KVBatch{Ops: ops}}}, a.renderKVBatch)
	if ok {
		a.renderKVBatch(w, res)
	}
}

func parseKVBody(body []byte) ([]*fsmpb.KVOp, error) {
	var raws []json.RawMessage
	switch firstByte(body) {
	case '[':
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, bad("Invalid JSON: " + err.Error())
		}
	default:
		o, err := parseObject(body)
		if err != nil {
			return nil, err
		}
		var ok bool
		if raws, ok = array(o["operations"]); !ok {
			return nil, kvBad("kv_bad_request", "operations must be an array")
		}
	}
	if len(raws) == 0 {
		return nil, kvBad("kv_bad_request", "operations must not be empty")
	}
	return parseKVOps(raws, false)
}

func hasWrites(ops []*fsmpb.KVOp) bool {
	for _, op := range ops {
		if kvstore.Gates(op.Kind) {
			return true
		}
	}
	return false
}

func (a *API) renderKVBatch(w http.ResponseWriter, res proto.Message) {
	kr := res.(*fsmpb.KVBatchResult)
	if kr.Reason == fsm.ReasonKVDisabled {
		writeKVDisabled(w)
		return
	}
	if !kr.Ok {
		writeJSON(w, http.StatusOK, kvRefusal(kr))
		return
	}
	out := make([]map[string]any, len(kr.Results))
	for i, r := range kr.Results {
		out[i] = kvResultOut(r)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "results": out})
}

// readKV answers read-only ops from a linearizable read. The operator's
// kill switch is read in the same view (writes are refused by apply).
func (a *API) readKV(w http.ResponseWriter, r *http.Request, ops []*fsmpb.KVOp) (*fsmpb.KVBatchResult, bool) {
	res := &fsmpb.KVBatchResult{Ok: true, FailedIndex: -1}
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		if !rd.Switches().KvEnabled {
			res = &fsmpb.KVBatchResult{Reason: fsm.ReasonKVDisabled}
			return nil
		}
		now := a.b.Now()
		for _, op := range ops {
			res.Results = append(res.Results, rd.KV(op, now))
		}
		return nil
	})
	if err != nil {
		writeBackendError(w, err)
		return nil, false
	}
	return res, true
}

// allowKVRead spends one token of the node's KV read rate, or answers 429.
func (a *API) allowKVRead(w http.ResponseWriter) bool {
	if a.kvReads == nil || a.kvReads.Allow() {
		return true
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusTooManyRequests, errorBody{Error: "kv read rate exceeded on this node", Code: "kv_rate_limited"})
	return false
}

func writeKVDisabled(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "kv is disabled by the operator (GET /api/v1/system/kv-timers)", Code: "kv_disabled"})
}

func kvRefusal(res *fsmpb.KVBatchResult) map[string]any {
	out := map[string]any{"ok": false, "reason": res.Reason, "failedIndex": res.FailedIndex}
	if int(res.FailedIndex) < len(res.Results) && res.FailedIndex >= 0 {
		f := res.Results[res.FailedIndex]
		out["kvReason"] = f.Reason
		out["version"] = f.Version
		if f.HasValue {
			out["value"] = json.RawMessage(f.Value)
		} else {
			out["value"] = nil
		}
	}
	return out
}

// kvPath handles GET/PUT/DELETE /api/v1/kv/:ns/*key.
func (a *API) kvGet(w http.ResponseWriter, r *http.Request) {
	a.kvPath(w, r, object{"op": json.RawMessage(`"get"`)})
}

func (a *API) kvPut(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	for _, k := range []string{"op", "ns", "key"} {
		if _, has := o[k]; has {
			writeDecodeError(w, kvBad("kv_bad_request", `the path names the key: the body must not carry "`+k+`"`))
			return
		}
	}
	o["op"] = json.RawMessage(`"put"`)
	a.kvPath(w, r, o)
}

func (a *API) kvDelete(w http.ResponseWriter, r *http.Request) {
	o := object{}
	body, err := a.readBody(r) // the body is optional here
	var br *badRequest
	if err != nil && !(errors.As(err, &br) && br.msg == msgEmptyBody) {
		writeDecodeError(w, err)
		return
	}
	if err == nil {
		if o, err = parseObject(body); err != nil {
			writeDecodeError(w, err)
			return
		}
		for _, k := range []string{"op", "ns", "key"} {
			if _, has := o[k]; has {
				writeDecodeError(w, kvBad("kv_bad_request", `the path names the key: the body must not carry "`+k+`"`))
				return
			}
		}
	}
	o["op"] = json.RawMessage(`"delete"`)
	a.kvPath(w, r, o)
}

func (a *API) kvPath(w http.ResponseWriter, r *http.Request, o object) {
	ns, _ := json.Marshal(r.PathValue("ns"))
	key, _ := json.Marshal(r.PathValue("key"))
	o["ns"], o["key"] = ns, key
	op, err := parseKVOp(0, o, false)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	render := func(w http.ResponseWriter, res proto.Message) {
		kr := res.(*fsmpb.KVBatchResult)
		switch {
		case kr.Reason == fsm.ReasonKVDisabled:
			writeKVDisabled(w)
		case !kr.Ok:
			writeJSON(w, http.StatusOK, kvRefusal(kr))
		default:
			writeJSON(w, http.StatusOK, kvResultOut(kr.Results[0]))
		}
	}
	ops := []*fsmpb.KVOp{op}
	if !hasWrites(ops) {
		if !a.allowKVRead(w) {
			return
		}
		if res, ok := a.readKV(w, r, ops); ok {
			render(w, res)
		}
		return
	}
	if res, ok := a.apply(w, r, nil, &fsmpb.Command{Body: &fsmpb.Command_Kv{Kv: &fsmpb.KVBatch{Ops: ops}}}, render); ok {
		render(w, res)
	}
}
