package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// parseTransaction validates a transaction body (spec §4.5). A verdict that
// needs no entry (an unknown op type) comes back as a ready response.
func parseTransaction(o object) (*fsmpb.Transaction, map[string]any, error) {
	in := &fsmpb.Transaction{}
	var ops []json.RawMessage
	if raw, has := o["operations"]; has && present(raw) {
		var ok bool
		if ops, ok = array(raw); !ok {
			return nil, nil, bad("operations array required")
		}
	}
	var timerRaw []json.RawMessage
	if raw, has := o["timers"]; has {
		var ok bool
		if timerRaw, ok = array(raw); !ok {
			return nil, nil, bad("timers must be an array")
		}
	}
	var kvRaw []json.RawMessage
	if raw := o["kv"]; present(raw) {
		var ok bool
		if kvRaw, ok = array(raw); !ok {
			return nil, nil, bad("kv must be an array")
		}
	}
	if len(ops) == 0 && len(kvRaw) == 0 && len(timerRaw) == 0 {
		if _, has := o["operations"]; !has {
			return nil, nil, bad("operations array required")
		}
		return nil, nil, bad("operations array cannot be empty")
	}
	if raw := o["requiredLeases"]; present(raw) {
		elems, ok := array(raw)
		if !ok {
			return nil, nil, bad("requiredLeases must be an array of strings")
		}
		for _, e := range elems {
			s, ok := str(e)
			if !ok {
				return nil, nil, bad("requiredLeases must be an array of strings")
			}
			in.RequiredLeases = append(in.RequiredLeases, s)
		}
	}
	// Every op is validated (a 400) before an unknown op type is answered
	// as a verdict, so the answer does not depend on the order of the ops.
	unknownType := ""
	for _, raw := range ops {
		op, ok := asObject(raw)
		if !ok {
			return nil, nil, bad("Each operation must be an object")
		}
		typ, _ := str(op["type"])
		switch typ {
		case "ack":
			it, known, err := parseAckItem(op, false)
			if err != nil {
				return nil, nil, err
			}
			if !known {
				it.Status = fsm.StatusCompleted // 2.x: an unknown status reads as completed
			}
			in.Ops = append(in.Ops, &fsmpb.TxnOp{Op: &fsmpb.TxnOp_Ack{Ack: it}})
		case "push":
			var items []*fsmpb.PushItem
			if raw, has := op["items"]; has {
				var err error
				if items, err = parsePushItems(raw); err != nil {
					return nil, nil, err
				}
			} else {
				it, err := parsePushItem(op)
				if err != nil {
					return nil, nil, err
				}
				items = []*fsmpb.PushItem{it}
			}
			for _, it := range items {
				in.Ops = append(in.Ops, &fsmpb.TxnOp{Op: &fsmpb.TxnOp_Push{Push: it}})
			}
		case "kv":
			return nil, nil, bad(`kv operations go in the root "kv" array, not in operations`)
		case "timer", "timers":
			return nil, nil, bad(`timer operations go in the root "timers" array, not in operations`)
		default:
			if unknownType == "" {
				unknownType = typ
				if _, isStr := str(op["type"]); !isStr {
					unknownType = string(op["type"])
				}
			}
		}
	}
	kvOps, err := parseKVOps(kvRaw, true)
	if err != nil {
		return nil, nil, err
	}
	in.Kv = kvOps
	if in.Timers, err = parseTimerOps(timerRaw, timerStrictness{}); err != nil {
		return nil, nil, err
	}
	if unknownType != "" {
		return nil, map[string]any{"success": false, "error": "Unknown operation type: " + unknownType, "results": []any{}}, nil
	}
	id := uuid.New()
	in.TransactionId = id[:]
	return in, nil, nil
}

func (a *API) transaction(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	idem, handled := a.idempotency(w, r, body, a.renderTxn)
	if handled {
		return
	}
	o, err := parseObject(body)
	var in *fsmpb.Transaction
	var verdict map[string]any
	if err == nil {
		in, verdict, err = parseTransaction(o)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if verdict != nil {
		writeJSON(w, http.StatusOK, verdict)
		return
	}
	res, ok := a.apply(w, r, idem, &fsmpb.Command{Body: &fsmpb.Command_Transaction{Transaction: in}}, a.renderTxn)
	if ok {
		a.renderTxn(w, res)
	}
}

func (a *API) renderTxn(w http.ResponseWriter, res proto.Message) {
	tr := res.(*fsmpb.TxnResult)
	switch tr.Reason {
	case fsm.ReasonKVDisabled:
		writeJSON(w, http.StatusForbidden, errorBody{Error: "kv is disabled by the operator (GET /api/v1/system/kv-timers)", Code: "kv_disabled"})
		return
	case fsm.ReasonTimersDisabled:
		writeJSON(w, http.StatusForbidden, errorBody{Error: "timer scheduling is paused by the operator (GET /api/v1/system/kv-timers)", Code: "timers_disabled"})
		return
	}
	writeJSON(w, http.StatusOK, txnOut(tr))
}

// txnOut shapes a transaction verdict (spec §4.5, addendum §3).
func txnOut(r *fsmpb.TxnResult) map[string]any {
	out := map[string]any{"transactionId": uuidOrEmpty(r.TransactionId), "success": r.Success}
	if !r.Success {
		out["reason"] = r.Reason
		out["error"] = r.Error
		out["results"] = []any{}
		out["ok"] = false
		if r.Reason == fsm.ReasonKVPrecondition && r.FailedKv != nil {
			out["failedIndex"] = r.FailedIndex
			out["kvReason"] = r.FailedKv.Reason
			out["version"] = r.FailedKv.Version
			if r.FailedKv.HasValue {
				out["value"] = json.RawMessage(r.FailedKv.Value)
			} else {
				out["value"] = nil
			}
		}
		return out
	}
	results := make([]map[string]any, len(r.Results))
	for i, it := range r.Results {
		m := map[string]any{"index": i, "type": it.Type, "success": it.Success}
		switch it.Type {
		case "ack":
			m["transactionId"] = it.TransactionId
			m["error"] = nil
			m["dlq"] = it.Dlq
			m["leaseReleased"] = it.LeaseReleased
		case "push":
			m["transactionId"] = it.TransactionId
			m["messageId"] = uuidString(it.MessageId)
			m["partitionId"] = uuidString(it.PartitionId)
			m["queueName"] = it.Queue
			m["offset"] = it.Offset
		case "kv":
			for k, v := range kvResultOut(it.Kv) {
				m[k] = v
			}
		case "timer":
			for k, v := range timerResultOut(it.Timer) {
				m[k] = v
			}
			m["opIndex"] = it.Timer.OpIndex
		}
		results[i] = m
	}
	out["results"] = results
	return out
}
