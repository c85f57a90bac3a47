package queen

import (
	"context"
	"encoding/json"
	"net/http"

	"google.golang.org/grpc/codes"
)

// The HTTP transport's transaction and KV bodies (spec §4.5, §4.7).

type jsonKVOp struct {
	Op         string          `json:"op"`
	NS         string          `json:"ns"`
	Key        string          `json:"key,omitempty"`
	Keys       []string        `json:"keys,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	TTLSeconds int64           `json:"ttlSeconds,omitempty"`
	Forever    bool            `json:"forever,omitempty"`
	Expect     *uint64         `json:"expect,omitempty"`
	Required   bool            `json:"required,omitempty"`
}

func toJSONKV(op kvOp) jsonKVOp {
	j := jsonKVOp{Op: op.Op, NS: op.NS, Key: op.Key, Keys: op.Keys, Value: op.Value, Expect: op.Expect, Required: op.Required}
	if storesValue(op.Op) {
		j.TTLSeconds, j.Forever = ttlSeconds(op.TTL)
	}
	return j
}

type jsonKVResult struct {
	Op, Key, Reason, ExpiresAt string
	Found, Applied, Truncated  bool
	Value                      json.RawMessage
	Version                    uint64
	Rows                       []struct {
		Key       string
		Value     json.RawMessage
		Version   uint64
		ExpiresAt *string
	}
	Missing []string
}

func (r jsonKVResult) neutral() kvResult {
	out := kvResult{Op: r.Op, Key: r.Key, Reason: r.Reason, Found: r.Found, Applied: r.Applied, Truncated: r.Truncated,
		Value: r.Value, Version: r.Version, ExpiresAt: parseTime(r.ExpiresAt), Missing: r.Missing}
	for _, row := range r.Rows {
		e := KVEntry{Key: row.Key, Found: true, Value: row.Value, Version: row.Version}
		if row.ExpiresAt != nil {
			e.ExpiresAt = parseTime(*row.ExpiresAt)
		}
		out.Rows = append(out.Rows, e)
	}
	return out
}

// jsonRefusal is the part of a refusal that names the lost gate.
type jsonRefusal struct {
	Reason      string
	FailedIndex int
	KVReason    string
	Version     uint64
	Value       json.RawMessage
}

func (t *httpTransport) kv(ctx context.Context, ops []kvOp) (*kvResponse, error) {
	in := make([]jsonKVOp, len(ops))
	for i, op := range ops {
		in[i] = toJSONKV(op)
	}
	var out struct {
		OK      bool
		Results []jsonKVResult
		jsonRefusal
	}
	if err := t.call(ctx, http.MethodPost, "/api/v1/kv", map[string]any{"operations": in}, &out); err != nil {
		return nil, err
	}
	res := &kvResponse{OK: out.OK, Reason: out.Reason, FailedIndex: out.FailedIndex}
	if !out.OK {
		res.Failed = &kvResult{Reason: out.KVReason, Version: out.Version, Value: out.Value}
	}
	for _, r := range out.Results {
		res.Results = append(res.Results, r.neutral())
	}
	return res, nil
}

func (t *httpTransport) transaction(ctx context.Context, req *txnRequest) (*TxResult, error) {
	ops := make([]map[string]any, 0, len(req.ops))
	for _, op := range req.ops {
		if op.ack != nil {
			a := toJSONAck(*op.ack, op.ack.Group)
			m := map[string]any{"type": "ack", "transactionId": a.TransactionID, "partitionId": a.PartitionID, "status": a.Status}
			if a.ConsumerGroup != "" {
				m["consumerGroup"] = a.ConsumerGroup
			}
			if a.LeaseID != "" {
				m["leaseId"] = a.LeaseID
			}
			if a.Error != nil {
				m["error"] = *a.Error
			}
			ops = append(ops, m)
			continue
		}
		ops = append(ops, map[string]any{"type": "push", "items": []jsonPushItem{toJSONPush(*op.push)}})
	}
	body := map[string]any{"operations": ops}
	if len(req.kv) > 0 {
		kv := make([]jsonKVOp, len(req.kv))
		for i, op := range req.kv {
			kv[i] = toJSONKV(op)
		}
		body["kv"] = kv
	}
	if len(req.timers) > 0 {
		body["timers"] = toJSONTimers(req.timers)
	}
	if len(req.requiredLeases) > 0 {
		body["requiredLeases"] = req.requiredLeases
	}
	var out struct {
		Success       bool
		TransactionID string
		Error         string
		Results       []json.RawMessage
		jsonRefusal
	}
	out.FailedIndex = -1 // absent: a broker that does not name the refused op
	replayed, err := t.send(ctx, http.MethodPost, "/api/v1/transaction", req.idemKey, body, &out)
	if err != nil {
		return nil, err
	}
	res := &TxResult{Committed: out.Success, TransactionID: out.TransactionID, Replayed: replayed}
	if !out.Success {
		return res, verdict(res, out.Reason, out.Error, out.FailedIndex, &kvResult{Reason: out.KVReason, Version: out.Version, Value: out.Value})
	}
	for _, raw := range out.Results {
		it, err := txnItemOf(raw)
		if err != nil {
			return nil, err
		}
		res.Results = append(res.Results, it)
	}
	return res, nil
}

// txnItemOf decodes one result of a committed transaction; a kv or timer
// result carries that op's own fields beside type and index.
func txnItemOf(raw json.RawMessage) (TxItem, error) {
	var r struct {
		Type, TransactionID, MessageID, PartitionID, QueueName string
		DLQ, LeaseReleased                                     bool
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return TxItem{}, undecodable(err)
	}
	it := TxItem{Type: r.Type, TransactionID: r.TransactionID, MessageID: r.MessageID, PartitionID: r.PartitionID,
		Queue: r.QueueName, DLQ: r.DLQ, LeaseReleased: r.LeaseReleased}
	switch r.Type {
	case "kv":
		var kv jsonKVResult
		if err := json.Unmarshal(raw, &kv); err != nil {
			return it, undecodable(err)
		}
		kr := kv.neutral()
		it.KV = &KVWrite{Key: kr.Key, Applied: kr.Applied, Reason: kr.Reason, Version: kr.Version, Value: kr.Value}
	case "timer":
		var tr jsonTimerResult
		if err := json.Unmarshal(raw, &tr); err != nil {
			return it, undecodable(err)
		}
		n := tr.neutral()
		it = TxItem{Type: r.Type, Timer: &n} // its messageId and queue are the timer's own
	}
	return it, nil
}

func undecodable(err error) error {
	return &Error{Status: http.StatusOK, Code: codes.Internal, Message: "answer does not decode: " + err.Error()}
}
