package queen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// admin.go's calls over the Queen HTTP API.

type jsonLockHolder struct {
	Slot      uint32  `json:"slot"`
	Owner     *string `json:"owner"`
	Token     uint64  `json:"token"`
	Since     string  `json:"since"`
	ExpiresAt *string `json:"expiresAt"`
}

type jsonLockResult struct {
	Name                              string  `json:"name"`
	Acquired, Renewed, Released, Held *bool   `json:"-"`
	Reason                            string  `json:"reason"`
	Slot                              uint32  `json:"slot"`
	Token                             uint64  `json:"token"`
	Owner                             *string `json:"owner"`
	Already                           bool    `json:"already"`
	Since                             string  `json:"since"`
	ExpiresAt                         string  `json:"expiresAt"`
	Guard                             *struct {
		NS     string `json:"ns"`
		Key    string `json:"key"`
		Expect uint64 `json:"expect"`
	} `json:"guard"`
	Holders []jsonLockHolder `json:"holders"`
	Flags   map[string]any   `json:"-"`
}

func (t *httpTransport) locks(ctx context.Context, ops []lockOp) ([]Lock, error) {
	body := make([]map[string]any, len(ops))
	for i, op := range ops {
		m := map[string]any{"op": op.Op, "name": op.Name}
		if op.Owner != "" {
			m["owner"] = op.Owner
		}
		if op.Limit > 0 {
			m["limit"] = op.Limit
		}
		if op.TTL > 0 {
			m["ttlSeconds"] = op.TTL
		}
		if op.Op == "renew" || op.Op == "release" {
			m["token"], m["slot"] = op.Token, op.Slot
		}
		body[i] = m
	}
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := t.call(ctx, http.MethodPost, "/api/v1/locks", map[string]any{"operations": body}, &out); err != nil {
		return nil, err
	}
	res := make([]Lock, len(out.Results))
	for i, raw := range out.Results {
		var j jsonLockResult
		var flags map[string]any
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, &Error{Message: "a lock result does not decode: " + err.Error()}
		}
		json.Unmarshal(raw, &flags)
		l := Lock{Name: j.Name, Reason: j.Reason, Slot: j.Slot, Token: j.Token, Already: j.Already,
			Since: parseTime(j.Since), ExpiresAt: parseTime(j.ExpiresAt)}
		for _, k := range []string{"acquired", "renewed", "released"} {
			if b, ok := flags[k].(bool); ok {
				l.OK = b
			}
		}
		if b, ok := flags["held"].(bool); ok {
			l.OK, l.Held = true, b
		}
		if j.Owner != nil {
			l.Owner = *j.Owner
		}
		if j.Guard != nil {
			l.GuardNS, l.GuardKey, l.GuardExpect = j.Guard.NS, j.Guard.Key, j.Guard.Expect
		}
		for _, h := range j.Holders {
			lh := LockHolder{Slot: h.Slot, Token: h.Token, Since: parseTime(h.Since)}
			if h.Owner != nil {
				lh.Owner = *h.Owner
			}
			if h.ExpiresAt != nil {
				lh.ExpiresAt = parseTime(*h.ExpiresAt)
			}
			l.Holders = append(l.Holders, lh)
		}
		res[i] = l
	}
	return res, nil
}

func (t *httpTransport) listGroups(ctx context.Context, group string) ([]GroupQueue, error) {
	names := []string{group}
	if group == "" {
		var rows []struct {
			Name string `json:"name"`
		}
		if err := t.call(ctx, http.MethodGet, "/api/v1/consumer-groups", nil, &rows); err != nil {
			return nil, err
		}
		names = names[:0]
		seen := map[string]bool{}
		for _, r := range rows {
			if !seen[r.Name] {
				seen[r.Name] = true
				names = append(names, r.Name)
			}
		}
	}
	var out []GroupQueue
	for _, g := range names {
		var detail struct {
			Queues []struct {
				QueueName             string  `json:"queueName"`
				SubscriptionMode      *string `json:"subscriptionMode"`
				SubscriptionTimestamp *string `json:"subscriptionTimestamp"`
				Partitions            []struct {
					Partition      string  `json:"partition"`
					PartitionID    string  `json:"partitionId"`
					ConsumedOffset uint64  `json:"consumedOffset"`
					NewestOffset   uint64  `json:"newestOffset"`
					Pending        uint64  `json:"pendingMessages"`
					LagSeconds     int64   `json:"lagSeconds"`
					LeaseExpiresAt *string `json:"leaseExpiresAt"`
					RetryCount     uint32  `json:"retryCount"`
				} `json:"partitions"`
			} `json:"queues"`
		}
		if err := t.call(ctx, http.MethodGet, "/api/v1/consumer-groups/"+url.PathEscape(g), nil, &detail); err != nil {
			return nil, err
		}
		for _, q := range detail.Queues {
			gq := GroupQueue{Group: g, Queue: q.QueueName}
			if q.SubscriptionMode != nil {
				gq.SubscriptionMode = *q.SubscriptionMode
			}
			if q.SubscriptionTimestamp != nil {
				gq.SubscriptionTimestamp = parseTime(*q.SubscriptionTimestamp)
			}
			for _, p := range q.Partitions {
				gp := GroupPartition{Partition: p.Partition, PartitionID: p.PartitionID, ConsumedOffset: p.ConsumedOffset,
					NewestOffset: p.NewestOffset, Pending: p.Pending, Lag: time.Duration(p.LagSeconds) * time.Second, RetryCount: p.RetryCount}
				if p.LeaseExpiresAt != nil {
					gp.LeaseExpiresAt = parseTime(*p.LeaseExpiresAt)
				}
				gq.Partitions = append(gq.Partitions, gp)
			}
			out = append(out, gq)
		}
	}
	return out, nil
}

func (t *httpTransport) seekGroup(ctx context.Context, group, queue, partition string, at time.Time) (*SeekResult, error) {
	base := "/api/v1/consumer-groups/" + url.PathEscape(group) + "/queues/" + url.PathEscape(queue)
	if partition != "" {
		var out struct {
			Updated       bool    `json:"updated"`
			CursorMovedTo *string `json:"cursorMovedTo"`
		}
		if err := t.call(ctx, http.MethodPost, base+"/partitions/"+url.PathEscape(partition)+"/seek", map[string]any{}, &out); err != nil {
			return nil, err
		}
		r := &SeekResult{}
		if out.Updated {
			r.PartitionsUpdated = 1
		}
		if out.CursorMovedTo != nil {
			r.CursorMovedTo = parseTime(*out.CursorMovedTo)
		}
		return r, nil
	}
	body := map[string]any{"toEnd": true}
	if !at.IsZero() {
		body = map[string]any{"timestamp": at.UTC().Format(time.RFC3339Nano)}
	}
	var out struct {
		PartitionsUpdated int `json:"partitionsUpdated"`
	}
	if err := t.call(ctx, http.MethodPost, base+"/seek", body, &out); err != nil {
		return nil, err
	}
	return &SeekResult{PartitionsUpdated: out.PartitionsUpdated}, nil
}

func (t *httpTransport) deleteGroup(ctx context.Context, group, queue string, keepMetadata bool) (*DeleteGroupResult, error) {
	path := "/api/v1/consumer-groups/" + url.PathEscape(group)
	if queue != "" {
		path += "/queues/" + url.PathEscape(queue)
	}
	if keepMetadata {
		path += "?deleteMetadata=false"
	}
	var out struct {
		DeletedPartitions int  `json:"deletedPartitions"`
		MetadataDeleted   bool `json:"metadataDeleted"`
	}
	if err := t.call(ctx, http.MethodDelete, path, nil, &out); err != nil {
		return nil, err
	}
	return &DeleteGroupResult{DeletedPartitions: out.DeletedPartitions, MetadataDeleted: out.MetadataDeleted}, nil
}

func (t *httpTransport) listDeadLetters(ctx context.Context, f DLQFilter) (*DeadLetterPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "consumerGroup": f.ConsumerGroup, "partition": f.Partition} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]time.Time{"from": f.From, "to": f.To} {
		if !v.IsZero() {
			q.Set(k, v.UTC().Format(time.RFC3339Nano))
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Offset > 0 {
		q.Set("offset", strconv.Itoa(f.Offset))
	}
	var out struct {
		Messages []struct {
			ID, DlqID, TransactionID, PartitionID, Queue, Partition, ConsumerGroup, ErrorMessage string
			RetryCount                                                                           int
			Data                                                                                 json.RawMessage
			CreatedAt, FailedAt                                                                  string
		} `json:"messages"`
		Total int64 `json:"total"`
	}
	if err := t.call(ctx, http.MethodGet, "/api/v1/dlq?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	page := &DeadLetterPage{Total: out.Total}
	for _, m := range out.Messages {
		page.DeadLetters = append(page.DeadLetters, DeadLetterRecord{DlqID: m.DlqID, MessageID: m.ID, TransactionID: m.TransactionID,
			PartitionID: m.PartitionID, Queue: m.Queue, Partition: m.Partition, ConsumerGroup: m.ConsumerGroup, Error: m.ErrorMessage,
			RetryCount: m.RetryCount, Data: m.Data, CreatedAt: parseTime(m.CreatedAt), FailedAt: parseTime(m.FailedAt)})
	}
	return page, nil
}

func (t *httpTransport) replayDeadLetter(ctx context.Context, dlqID string) (*Replay, error) {
	var out struct {
		Verdict, Queue, Partition, PartitionID, MessageID, TransactionID string
	}
	if err := t.call(ctx, http.MethodPost, "/api/v1/dlq/"+url.PathEscape(dlqID)+"/replay", map[string]any{}, &out); err != nil {
		return nil, err
	}
	return &Replay{Verdict: out.Verdict, Queue: out.Queue, Partition: out.Partition, PartitionID: out.PartitionID,
		MessageID: out.MessageID, TransactionID: out.TransactionID}, nil
}

func (t *httpTransport) purgeDeadLetters(ctx context.Context, queue, group string) (int, error) {
	q := url.Values{"queue": {queue}}
	if group != "" {
		q.Set("consumerGroup", group)
	}
	var out struct {
		Purged int `json:"purged"`
	}
	if err := t.call(ctx, http.MethodDelete, "/api/v1/dlq?"+q.Encode(), nil, &out); err != nil {
		return 0, err
	}
	return out.Purged, nil
}

func (t *httpTransport) getMessage(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error) {
	var out struct {
		ID, TransactionID, PartitionID, Queue, Partition, Status, CreatedAt string
		Payload                                                             json.RawMessage
	}
	if err := t.call(ctx, http.MethodGet, "/api/v1/messages/"+url.PathEscape(partitionID)+"/"+url.PathEscape(transactionID), nil, &out); err != nil {
		return nil, err
	}
	return &MessageInfo{ID: out.ID, TransactionID: out.TransactionID, PartitionID: out.PartitionID, Queue: out.Queue,
		Partition: out.Partition, Status: out.Status, Data: out.Payload, CreatedAt: parseTime(out.CreatedAt)}, nil
}

func (t *httpTransport) traces(ctx context.Context, partitionID, transactionID string) ([]Trace, error) {
	var out struct {
		Traces []struct {
			ID            string          `json:"id"`
			EventType     string          `json:"event_type"`
			Data          json.RawMessage `json:"data"`
			ConsumerGroup *string         `json:"consumer_group"`
			WorkerID      *string         `json:"worker_id"`
			CreatedAt     string          `json:"created_at"`
			Names         []string        `json:"trace_names"`
		} `json:"traces"`
	}
	if err := t.call(ctx, http.MethodGet, "/api/v1/traces/"+url.PathEscape(partitionID)+"/"+url.PathEscape(transactionID), nil, &out); err != nil {
		return nil, err
	}
	res := make([]Trace, len(out.Traces))
	for i, tr := range out.Traces {
		res[i] = Trace{ID: tr.ID, EventType: tr.EventType, Data: tr.Data, Names: tr.Names, CreatedAt: parseTime(tr.CreatedAt)}
		if tr.ConsumerGroup != nil {
			res[i].ConsumerGroup = *tr.ConsumerGroup
		}
		if tr.WorkerID != nil {
			res[i].WorkerID = *tr.WorkerID
		}
	}
	return res, nil
}

func (t *httpTransport) health(ctx context.Context) (*Health, error) {
	var out struct {
		NodeID string `json:"nodeId"`
		Status string `json:"status"`
		Raft   struct {
			Role         string `json:"role"`
			LeaderID     string `json:"leaderId"`
			Term         uint64 `json:"term"`
			Commit       uint64 `json:"commit"`
			Applied      uint64 `json:"applied"`
			StorageReady bool   `json:"storageReady"`
		} `json:"raft"`
	}
	// /health answers 503 with the same body while the node settles: that
	// is an answer here, not an error.
	if err := t.call(ctx, http.MethodGet, "/health", nil, &out); err != nil {
		if e, ok := err.(*Error); !ok || e.Status != http.StatusServiceUnavailable || out.NodeID == "" {
			return nil, err
		}
	}
	return &Health{NodeID: out.NodeID, Status: out.Status, Role: out.Raft.Role, LeaderID: out.Raft.LeaderID,
		Term: out.Raft.Term, Commit: out.Raft.Commit, Applied: out.Raft.Applied, StorageReady: out.Raft.StorageReady}, nil
}
