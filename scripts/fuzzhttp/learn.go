package main

import (
	"encoding/json"
	"slices"
	"strings"
)

// What the fuzzer learns from the node's answers (lease ids, messages,
// dead letters, trace names, permits) to make later requests reach state.

// learn keeps what a 2xx answer tells about the state: partition ids,
// leases, KV versions, a backup.
func (f *fuzzer) learn(r *req, b base, pattern string, resp *resp) {
	w := f.g.w
	switch {
	case pattern == "POST /api/v1/push" || pattern == "POST /api/v1/transaction":
		var items []map[string]any
		if pattern == "POST /api/v1/transaction" {
			var t struct {
				Results []map[string]any `json:"results"`
			}
			json.Unmarshal(resp.Body, &t)
			items = t.Results
		} else {
			json.Unmarshal(resp.Body, &items)
		}
		for _, it := range items {
			p, _ := it["partitionId"].(string)
			t, _ := it["transactionId"].(string)
			q, _ := it["queueName"].(string)
			if p != "" && !slices.Contains(w.partitionIDs, p) {
				w.partitionIDs = keepLast(append(w.partitionIDs, p), 64)
			}
			if t != "" {
				w.txns = keepLast(append(w.txns, t), 64)
			}
			if st, _ := it["status"].(string); st != "failed" {
				w.addMsg(msgRef{partitionID: p, txn: t, queue: q})
			}
		}
	case strings.HasPrefix(pattern, "GET /api/v1/pop") && resp.Status == 200:
		var p struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
				PartitionID   string `json:"partitionId"`
				LeaseID       string `json:"leaseId"`
				Group         string `json:"consumerGroup"`
				Queue         string `json:"queue"`
				Partition     string `json:"partition"`
			} `json:"messages"`
		}
		json.Unmarshal(resp.Body, &p)
		byKey := map[string]*lease{}
		var order []string
		for _, m := range p.Messages {
			k := m.LeaseID + "/" + m.PartitionID
			l := byKey[k]
			if l == nil {
				grp := m.Group
				if grp == "__QUEUE_MODE__" {
					grp = ""
				}
				l = &lease{id: m.LeaseID, partitionID: m.PartitionID, queue: m.Queue, partition: m.Partition, group: grp}
				byKey[k] = l
				order = append(order, k)
			}
			l.txns = append(l.txns, m.TransactionID)
			w.addMsg(msgRef{partitionID: m.PartitionID, txn: m.TransactionID, queue: m.Queue})
		}
		for _, k := range order {
			if l := byKey[k]; l.id != "" {
				w.leases = keepLast(append(w.leases, *l), 32)
			}
		}
	case pattern == "POST /api/v1/kv" && r.Valid:
		var k struct {
			Results []struct {
				Key     string `json:"key"`
				Version int64  `json:"version"`
			} `json:"results"`
		}
		json.Unmarshal(resp.Body, &k)
		ops, _ := b.body.(*obj)
		var list []any
		if ops != nil && len(ops.vals) > 0 {
			list, _ = ops.vals[0].([]any)
		} else if arr, ok := b.body.([]any); ok {
			list = arr
		}
		for i, res := range k.Results {
			if i < len(list) && res.Version > 0 {
				if op, ok := list[i].(*obj); ok {
					ns, _ := member(op, "ns").(string)
					w.kvVersions[ns+"/"+res.Key] = res.Version
				}
			}
		}
	case pattern == "PUT /api/v1/kv/{ns}/{key...}" && r.Valid:
		var k struct {
			Version int64 `json:"version"`
		}
		if json.Unmarshal(resp.Body, &k) == nil && k.Version > 0 && len(b.params) == 2 {
			w.kvVersions[b.params[0][1]+"/"+b.params[1][1]] = k.Version
		}
	case pattern == "GET /api/v1/system/backup" && len(resp.Body) < 8<<20:
		w.backup = resp.Body
	default:
		f.learnMessages(r, b, pattern, resp)
	}
	if togglePatterns[pattern] && r.Method == "POST" && !r.undo && f.undoAt == 0 {
		f.undoAt = r.Seq + 5 + f.g.r.IntN(40)
	}
}

// learnMessages keeps what the message, dead-letter and trace routes
// answer: messages (partition and transaction ids), dead letters (dlqId,
// from GET /api/v1/dlq rows and a message's deadLetters; a replay or a
// purge drops them) and trace names.
func (f *fuzzer) learnMessages(r *req, b base, pattern string, resp *resp) {
	w := f.g.w
	// row is what the list and detail views say of a message or a dead
	// letter.
	type row struct {
		DlqID         string `json:"dlqId"`
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		Queue         string `json:"queue"`
		Group         string `json:"consumerGroup"`
	}
	switch pattern {
	case "GET /api/v1/dlq", "GET /api/v1/messages":
		var l struct {
			Messages []row `json:"messages"`
		}
		json.Unmarshal(resp.Body, &l)
		for _, m := range l.Messages {
			if pattern == "GET /api/v1/dlq" {
				w.addDeadLetter(deadLetter{id: m.DlqID, partitionID: m.PartitionID, txn: m.TransactionID, queue: m.Queue, group: m.Group})
			} else {
				w.addMsg(msgRef{partitionID: m.PartitionID, txn: m.TransactionID, queue: m.Queue})
			}
		}
	case "GET /api/v1/messages/{partitionId}/{transactionId}":
		var d struct {
			row
			DeadLetters []row `json:"deadLetters"`
		}
		json.Unmarshal(resp.Body, &d)
		w.addMsg(msgRef{partitionID: d.PartitionID, txn: d.TransactionID, queue: d.Queue})
		for _, dl := range d.DeadLetters {
			w.addDeadLetter(deadLetter{id: dl.DlqID, partitionID: d.PartitionID, txn: d.TransactionID, queue: d.Queue, group: dl.Group})
		}
	case "POST /api/v1/dlq/{id}/replay", "POST /api/v1/messages/{partitionId}/{transactionId}/retry":
		// The record is gone; the replayed message is a new one.
		var rp struct {
			row
			Verdict string `json:"verdict"`
		}
		if json.Unmarshal(resp.Body, &rp) == nil && rp.DlqID != "" {
			if rp.Verdict == "moved" {
				w.dropDeadLetters(func(d deadLetter) bool { return d.id == rp.DlqID })
			}
			w.addMsg(msgRef{partitionID: rp.PartitionID, txn: rp.TransactionID, queue: rp.Queue})
		}
	case "DELETE /api/v1/dlq":
		var p struct {
			Queue string  `json:"queue"`
			Group *string `json:"consumerGroup"`
		}
		if json.Unmarshal(resp.Body, &p) == nil && p.Queue != "" {
			w.dropDeadLetters(func(d deadLetter) bool { return d.queue == p.Queue && (p.Group == nil || d.group == *p.Group) })
		}
	case "POST /api/v1/traces":
		// The names sent, when the body was sent as made.
		if x, ok := b.body.(*obj); ok && r.Valid {
			switch v := member(x, "traceNames").(type) {
			case string:
				w.addTraceName(v)
			case []any:
				for _, n := range v {
					s, _ := n.(string)
					w.addTraceName(s)
				}
			}
		}
	case "POST /streams/v1/queries":
		var q struct {
			QueryID string `json:"query_id"`
		}
		if json.Unmarshal(resp.Body, &q) == nil && q.QueryID != "" && !slices.Contains(w.streamQueries, q.QueryID) {
			w.streamQueries = append(w.streamQueries, q.QueryID)
		}
	case "POST /api/v1/locks":
		// The permits acquired or renewed (their token and slot), and
		// those released.
		var l struct {
			Results []struct {
				Name     string  `json:"name"`
				Acquired *bool   `json:"acquired"`
				Renewed  *bool   `json:"renewed"`
				Released *bool   `json:"released"`
				Slot     int64   `json:"slot"`
				Token    int64   `json:"token"`
				Owner    *string `json:"owner"`
			} `json:"results"`
		}
		json.Unmarshal(resp.Body, &l)
		for _, res := range l.Results {
			switch {
			case (res.Acquired != nil && *res.Acquired) || (res.Renewed != nil && *res.Renewed):
				p := permit{slot: res.Slot, token: res.Token}
				if res.Owner != nil {
					p.owner = *res.Owner
				}
				w.permits[res.Name] = p
			case res.Released != nil && *res.Released:
				delete(w.permits, res.Name)
			}
		}
	case "GET /api/v1/traces/names":
		var l struct {
			Names []struct {
				Name string `json:"trace_name"`
			} `json:"names"`
		}
		json.Unmarshal(resp.Body, &l)
		for _, n := range l.Names {
			w.addTraceName(n.Name)
		}
	case "GET /api/v1/traces/by-name/{name}":
		var l struct {
			Traces []struct {
				TransactionID string `json:"transaction_id"`
				PartitionID   string `json:"partition_id"`
				Queue         string `json:"queue_name"`
			} `json:"traces"`
		}
		json.Unmarshal(resp.Body, &l)
		for _, t := range l.Traces {
			w.addMsg(msgRef{partitionID: t.PartitionID, txn: t.TransactionID, queue: t.Queue})
		}
	}
}

func member(x *obj, name string) any {
	for i, k := range x.keys {
		if k == name {
			return x.vals[i]
		}
	}
	return nil
}
