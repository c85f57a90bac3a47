package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

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
	var raws []json.RawMessage
	switch firstByte(body) {
	case '[':
		if err := json.Unmarshal(body, &raws); err != nil {
			writeDecodeError(w, bad("Invalid JSON: "+err.Error()))
			return
		}
	case '{':
		o, err := parseObject(body)
		if err != nil {
			writeDecodeError(w, err)
			return
		}
		var ok bool
		if raws, ok = array(o["operations"]); !ok {
			writeDecodeError(w, kvBad("kv_bad_request", "operations must be an array"))
			return
		}
	default:
		if _, err := parseObject(body); err != nil {
			writeDecodeError(w, err)
			return
		}
	}
	if len(raws) == 0 {
		writeDecodeError(w, kvBad("kv_bad_request", "operations must not be empty"))
		return
	}
	ops, err := parseKVOps(raws, false)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	res, ok := a.runKV(w, r, ops)
	if !ok {
		return
	}
	if !res.Ok {
		writeJSON(w, http.StatusOK, kvRefusal(res))
		return
	}
	out := make([]map[string]any, len(res.Results))
	for i, kr := range res.Results {
		out[i] = kvResultOut(kr)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "results": out})
}

// runKV applies ops: reads only go to the read path, anything else is one
// entry. It writes the error response itself when it fails.
func (a *API) runKV(w http.ResponseWriter, r *http.Request, ops []*fsmpb.KVOp) (*fsmpb.KVBatchResult, bool) {
	writes := false
	for _, op := range ops {
		if kvstore.Gates(op.Kind) {
			writes = true
		}
	}
	if !writes {
		res := &fsmpb.KVBatchResult{Ok: true, FailedIndex: -1}
		err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
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
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_Kv{Kv: &fsmpb.KVBatch{Ops: ops}}})
	if err != nil {
		writeBackendError(w, err)
		return nil, false
	}
	return res.(*fsmpb.KVBatchResult), true
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
	res, ok := a.runKV(w, r, []*fsmpb.KVOp{op})
	if !ok {
		return
	}
	if !res.Ok {
		writeJSON(w, http.StatusOK, kvRefusal(res))
		return
	}
	writeJSON(w, http.StatusOK, kvResultOut(res.Results[0]))
}
