package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// decodeKVOps checks each KV op's members' JSON types (spec §4.7).
func decodeKVOps(raws []jsontext.Value) ([]request.KVOp, error) {
	return eachOp(raws, func(i int) error { return request.KVBad("kv_bad_op", request.OpAt(i)+"must be an object") },
		decodeKVOp)
}

// tenantFields name a tenant: it comes from the connection, never from a
// body, and a body that names one is refused, never silently ignored
// (addendum §7).
var tenantFields = []string{"tenant", "tenantId", "tenant_id", "_tenant"}

// tenantIn names the first tenant field o carries.
func tenantIn(o object) (string, bool) {
	for _, f := range tenantFields {
		if _, has := o[f]; has {
			return f, true
		}
	}
	return "", false
}

func decodeKVOp(i int, o object) (request.KVOp, error) {
	at := request.OpAt(i)
	var op request.KVOp
	var ok bool
	if f, has := tenantIn(o); has {
		return op, request.KVBad("kv_tenant_in_body", at+f+" is not a field of an op: the tenant comes from the connection")
	}
	if op.Op, ok = str(o["op"]); !ok {
		return op, request.KVBad("kv_bad_op", at+"op must be a string")
	}
	if op.Ns, ok = str(o["ns"]); !ok {
		return op, request.KVBad("kv_bad_namespace", at+"ns must match ^[a-z0-9][a-z0-9._-]{0,63}$")
	}
	if raw, has := o["key"]; has {
		if op.Key, ok = str(raw); !ok {
			return op, request.KVBad("kv_bad_key", at+"key must be a non-empty string of at most 512 bytes")
		}
	}
	if raw, has := o["keys"]; has {
		elems, ok := array(raw)
		if !ok {
			return op, request.KVBad("kv_bad_key", at+"keys must be a non-empty array of strings")
		}
		for _, e := range elems {
			k, ok := str(e)
			if !ok {
				return op, request.KVBad("kv_bad_key", at+"keys must be non-empty strings of at most 512 bytes")
			}
			op.Keys = append(op.Keys, k)
		}
	}
	if raw, has := o["prefix"]; has {
		if op.Prefix, ok = str(raw); !ok {
			return op, request.KVBad("kv_bad_prefix", at+"prefix must be a non-empty string")
		}
	}
	type member struct {
		name, reason, msg string
		dst               *int64
		has               *bool
	}
	for _, m := range []member{
		{"limit", "kv_bad_limit", "limit must be an integer", &op.Limit, nil},
		{"delta", "kv_bad_delta", "delta must be an integer", &op.Delta, &op.HasDelta},
		{"min", "kv_bad_limit", "min must be an integer", &op.Min, &op.HasMin},
		{"max", "kv_bad_limit", "max must be an integer", &op.Max, &op.HasMax},
		{"expect", "kv_bad_expect", "expect must be an integer >= 0", &op.Expect, &op.HasExpect},
		{"ttlSeconds", "kv_expiry_not_specified", "ttlSeconds must be an integer > 0", &op.TTL, &op.HasTTL},
	} {
		raw := o[m.name]
		if !present(raw) {
			continue
		}
		n, ok := integer(raw)
		if !ok {
			return op, request.KVBad(m.reason, at+m.msg)
		}
		*m.dst = n
		if m.has != nil {
			*m.has = true
		}
	}
	if raw := o["after"]; present(raw) {
		if op.After, ok = str(raw); !ok {
			return op, request.KVBad("kv_bad_after", at+"after must be a string")
		}
	}
	for _, m := range []struct {
		name string
		dst  *bool
	}{{"keysOnly", &op.KeysOnly}, {"required", &op.Required}, {"forever", &op.Forever}} {
		if raw := o[m.name]; present(raw) {
			if *m.dst, ok = boolean(raw); !ok {
				return op, request.KVBad("kv_bad_request", at+m.name+" must be a boolean")
			}
		}
	}
	op.Value, op.HasValue = o["value"]
	return op, nil
}

// kvBatch is POST /api/v1/kv: {"operations":[...]} or a bare array. A call
// of reads only is a linearizable read; a call with any write is one entry.
func (a *API) kvBatch(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	ops, err := decodeKVBody(body)
	var cmdOps []*command.KVOp
	if err == nil {
		cmdOps, err = request.KVBatch(ops)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	a.runKV(w, r, idem, cmdOps, renderKVBatch)
}

func decodeKVBody(body []byte) ([]request.KVOp, error) {
	raws, err := opsOf(body, request.KVBad("kv_bad_request", "operations must be an array"))
	if err != nil {
		return nil, err
	}
	return decodeKVOps(raws)
}

// runKV answers KV ops: reads only from a linearizable read (safe to
// repeat, so nothing is stored under a key), anything else as one entry.
func (a *API) runKV(w http.ResponseWriter, r *http.Request, idem *command.Idempotency, ops []*command.KVOp,
	render func(http.ResponseWriter, *command.KVBatchResult)) {
	var res *command.KVBatchResult
	if request.HasKVWrites(ops) {
		out, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: ops}}})
		if !ok {
			return
		}
		res = out.(*command.KVBatchResult)
	} else {
		if err := a.rules.AllowKVRead(); err != nil {
			writeError(w, err)
			return
		}
		var err error
		if res, err = a.readKV(r, ops); err != nil {
			writeError(w, err)
			return
		}
	}
	if e := request.KVVerdict(res); e != nil {
		writeError(w, e)
		return
	}
	render(w, res)
}

func renderKVBatch(w http.ResponseWriter, kr *command.KVBatchResult) {
	if !kr.Ok {
		writeJSON(w, http.StatusOK, kvRefusal(kr))
		return
	}
	out := make([]map[string]any, len(kr.Results))
	for i, r := range kr.Results {
		out[i] = kvResultOut(r)
		out[i]["index"] = i
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "results": out})
}

// readKV answers read-only ops from one view, which also says whether the
// operator's kill switch is on (writes are refused by apply).
func (a *API) readKV(r *http.Request, ops []*command.KVOp) (*command.KVBatchResult, error) {
	res, err := a.query(r, &command.Query{Body: &command.Query_Kv{Kv: &command.KVReads{Ops: ops}}})
	return res.GetKv(), err
}

func kvRefusal(res *command.KVBatchResult) map[string]any {
	out := map[string]any{"ok": false, "reason": res.Reason.Text(), "failedIndex": res.FailedIndex}
	if int(res.FailedIndex) < len(res.Results) && res.FailedIndex >= 0 {
		f := res.Results[res.FailedIndex]
		out["kvReason"] = f.Reason.Text()
		out["version"] = f.Version
		if f.HasValue {
			out["value"] = json.RawMessage(f.Value)
		} else {
			out["value"] = nil
		}
	}
	return out
}

// The path routes GET/PUT/DELETE /api/v1/kv/:ns/*key: one op on the key
// the path names; a body that names it again is refused.

func (a *API) kvGet(w http.ResponseWriter, r *http.Request) {
	a.kvPath(w, r, "get", object{})
}

func (a *API) kvPut(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	a.kvPath(w, r, "put", o)
}

func (a *API) kvDelete(w http.ResponseWriter, r *http.Request) {
	o := object{}
	if body, err := a.readBody(r); err == nil { // the body is optional here
		if o, err = parseObject(body); err != nil {
			writeError(w, err)
			return
		}
	} else if e := request.FromError(err); e.Msg != msgEmptyBody {
		writeError(w, err)
		return
	}
	a.kvPath(w, r, "delete", o)
}

func (a *API) kvPath(w http.ResponseWriter, r *http.Request, name string, o object) {
	if r.URL.RawQuery != "" {
		writeError(w, request.KVBad("kv_no_query_string", "the KV path routes take no query string"))
		return
	}
	for _, k := range []string{"op", "ns", "key"} {
		if _, has := o[k]; has {
			writeError(w, request.KVBad("kv_field_in_path", `the path names the key: the body must not carry "`+k+`"`))
			return
		}
	}
	o["op"], o["ns"], o["key"] = jsonString(name), jsonString(r.PathValue("ns")), jsonString(r.PathValue("key"))
	in, err := decodeKVOp(0, o)
	var ops []*command.KVOp
	if err == nil {
		ops, err = request.KVOps([]request.KVOp{in}, false)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.runKV(w, r, nil, ops, func(w http.ResponseWriter, kr *command.KVBatchResult) {
		if !kr.Ok {
			writeJSON(w, http.StatusOK, kvRefusal(kr))
			return
		}
		res := kr.Results[0]
		if res.Kind == command.KVOp_GET && res.Found {
			w.Header().Set("ETag", `"`+strconv.FormatUint(res.Version, 10)+`"`)
		}
		writeJSON(w, http.StatusOK, kvResultOut(res))
	})
}

// jsonString is s as a JSON string member.
func jsonString(s string) jsontext.Value {
	b, _ := json.Marshal(s)
	return b
}
