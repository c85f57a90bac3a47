package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// decodeTransaction checks a transaction body's JSON types (spec §4.5,
// addendum §1.1): operations, and the kv and timers riders at the root.
func decodeTransaction(o object) (request.Txn, error) {
	var in request.Txn
	var ops, kvRaw, timerRaw, posRaw []jsontext.Value
	raw, has := o["operations"]
	in.NoOperations = !has
	if present(raw) {
		var ok bool
		if ops, ok = array(raw); !ok {
			return in, request.Bad("operations array required")
		}
	}
	// The riders: arrays at the root, null meaning absent (addendum §7).
	for _, r := range []struct {
		name string
		dst  *[]jsontext.Value
	}{{"kv", &kvRaw}, {"timers", &timerRaw}, {"positions", &posRaw}} {
		if raw := o[r.name]; present(raw) {
			var ok bool
			if *r.dst, ok = array(raw); !ok {
				return in, request.Bad(r.name + " must be an array at the TOP LEVEL of the body (beside operations)")
			}
		}
	}
	if raw := o["requiredLeases"]; present(raw) {
		elems, ok := array(raw)
		if !ok {
			return in, request.Bad("requiredLeases must be an array of strings")
		}
		for _, e := range elems {
			s, ok := str(e)
			if !ok {
				return in, request.Bad("requiredLeases must be an array of strings")
			}
			in.RequiredLeases = append(in.RequiredLeases, s)
		}
	}
	for _, raw := range ops {
		op, ok := asObject(raw)
		if !ok {
			return in, request.Bad("Each operation must be an object")
		}
		typ, isStr := str(op["type"])
		switch {
		case isStr && typ == "ack":
			a, err := decodeAck(op, false)
			if err != nil {
				return in, err
			}
			in.Ops = append(in.Ops, request.TxnOp{Ack: &a})
		case isStr && typ == "push":
			items, err := decodeTxnPush(op)
			if err != nil {
				return in, err
			}
			in.Ops = append(in.Ops, request.TxnOp{Push: items})
		case isStr && typ == "kv":
			return in, request.Bad(`kv operations go in the root "kv" array, not in operations`)
		case isStr && (typ == "timer" || typ == "timers"):
			return in, request.Bad(`timer operations go in the root "timers" array, not in operations`)
		case isStr:
			in.Ops = append(in.Ops, request.TxnOp{Unknown: typ})
		default:
			in.Ops = append(in.Ops, request.TxnOp{Unknown: string(op["type"])})
		}
	}
	var err error
	if in.KV, err = decodeKVOps(kvRaw); err != nil {
		return in, err
	}
	if in.Timers, err = decodeTimerOps(timerRaw); err != nil {
		return in, err
	}
	in.Positions, err = decodePositions(posRaw)
	return in, err
}

// decodePositions checks the members' JSON types of the positions rider
// (addendum §4.2).
func decodePositions(raws []jsontext.Value) ([]request.Position, error) {
	return eachOp(raws, func(i int) error { return request.Bad(fmt.Sprintf("positions[%d] must be an object", i)) },
		func(i int, o object) (request.Position, error) {
			at := fmt.Sprintf("positions[%d]: ", i)
			var p request.Position
			var ok bool
			for _, m := range []struct {
				name string
				dst  *string
				has  *bool
			}{{"queue", &p.Queue, nil}, {"consumerGroup", &p.ConsumerGroup, nil}, {"partition", &p.Partition, &p.HasPartition},
				{"subscriptionMode", &p.SubscriptionMode, nil}, {"subscriptionFrom", &p.SubscriptionFrom, nil}} {
				if raw := o[m.name]; present(raw) {
					if *m.dst, ok = str(raw); !ok {
						return p, request.Bad(at + m.name + " must be a string")
					}
					if m.has != nil {
						*m.has = true
					}
				}
			}
			raw, has := o["offset"]
			switch {
			case !has:
				return p, request.Bad(at + "offset is required (an integer, or null to forget the position)")
			case !present(raw):
				p.Forget = true
			default:
				if p.Offset, ok = integer(raw); !ok {
					return p, request.Bad(at + "offset must be an integer >= 0, or null to forget the position")
				}
			}
			if raw := o["metadata"]; present(raw) {
				p.Metadata = raw
			}
			return p, nil
		})
}

// decodeTxnPush reads a push op: one item, or several under "items".
func decodeTxnPush(op object) ([]request.PushItem, error) {
	raw, has := op["items"]
	if !has {
		it, err := decodePushItem(op)
		return []request.PushItem{it}, err
	}
	elems, ok := array(raw)
	if !ok {
		return nil, request.Bad("items array is required")
	}
	items := make([]request.PushItem, 0, len(elems))
	for _, e := range elems {
		o, ok := asObject(e)
		if !ok {
			return nil, request.Bad("Each item must be an object")
		}
		it, err := decodePushItem(o)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

func (a *API) transaction(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	o, err := parseObject(body)
	var decoded request.Txn
	if err == nil {
		decoded, err = decodeTransaction(o)
	}
	var in *command.Transaction
	if err == nil {
		in, err = a.rules.Transaction(decoded)
	}
	var unknown *request.UnknownOpType
	if errors.As(err, &unknown) {
		writeJSON(w, http.StatusOK, map[string]any{"success": false, "error": unknown.Error(), "results": []any{}})
		return
	}
	var verdict *request.TxnRefused
	if errors.As(err, &verdict) {
		writeJSON(w, http.StatusOK, txnOut(verdict.Result))
		return
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if res, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_Transaction{Transaction: in}}); ok {
		renderTxn(w, res)
	}
}

func renderTxn(w http.ResponseWriter, res proto.Message) {
	tr := res.(*command.TxnResult)
	if e := request.TxnVerdict(tr); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, txnOut(tr))
}

// txnOut shapes a transaction verdict (spec §4.5, addendum §3).
func txnOut(r *command.TxnResult) map[string]any {
	out := map[string]any{"transactionId": uuidOrEmpty(r.TransactionId), "success": r.Success}
	if !r.Success {
		out["reason"] = r.Reason.Text()
		out["error"] = r.Error
		out["results"] = []any{}
		out["ok"] = false
		if r.Reason == command.Reason_REJECTED_ACK && r.FailedIndex >= 0 {
			out["failedIndex"] = r.FailedIndex // the refused ack's index in operations
		}
		if r.Reason == command.Reason_KV_PRECONDITION && r.FailedKv != nil {
			out["failedIndex"] = r.FailedIndex
			out["kvReason"] = r.FailedKv.Reason.Text()
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
		m := map[string]any{"index": i, "type": it.Type.Text(), "success": it.Success}
		switch it.Type {
		case command.TxnItemResult_ACK:
			m["transactionId"] = it.TransactionId
			m["error"] = nil
			m["dlq"] = it.Dlq
			m["leaseReleased"] = it.LeaseReleased
		case command.TxnItemResult_PUSH:
			m["transactionId"] = it.TransactionId
			m["messageId"] = uuidString(it.MessageId)
			m["partitionId"] = uuidString(it.PartitionId)
			m["queueName"] = it.Queue
			m["offset"] = it.Offset
		case command.TxnItemResult_KV:
			for k, v := range kvResultOut(it.Kv) {
				m[k] = v
			}
			m["opIndex"] = it.OpIndex
		case command.TxnItemResult_TIMER:
			for k, v := range timerResultOut(it.Timer) {
				m[k] = v
			}
			m["opIndex"] = it.Timer.OpIndex
		case command.TxnItemResult_POSITION:
			m["opIndex"] = it.OpIndex
		}
		results[i] = m
	}
	out["results"] = results
	return out
}
