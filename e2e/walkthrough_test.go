package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

var popCreatedAt = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// requireKeys fails unless every key is present in the JSON object raw.
func requireKeys(t testing.TB, what string, raw json.RawMessage, keys ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not a JSON object: %v: %s", what, err, raw)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: key %q missing: %s", what, k, raw)
		}
	}
	return m
}

func requireUUID(t testing.TB, what, s string) {
	t.Helper()
	if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
		t.Errorf("%s = %q, want a UUID", what, s)
	}
}

// jsonEq compares two JSON texts by value.
func jsonEq(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func qv(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// TestSpecWalkthrough walks the spec's main flows against one real node
// with a plain HTTP client. Each subtest uses its own queues.
func TestSpecWalkthrough(t *testing.T) {
	n := startNode(t, nodeOpts{})

	t.Run("conventions", func(t *testing.T) {
		c := n.api(t)
		r := c.mustStatus(200, "GET", "/health", nil)
		m := requireKeys(t, "/health", r.Body, "status", "database", "server", "version")
		if string(m["status"]) != `"healthy"` {
			t.Errorf("/health status = %s, want \"healthy\"", m["status"])
		}
		r = c.mustStatus(http.StatusNoContent, "OPTIONS", "/api/v1/push", nil)
		if r.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("OPTIONS: Access-Control-Allow-Origin = %q, want *", r.Header.Get("Access-Control-Allow-Origin"))
		}
		r = c.mustStatus(http.StatusNotFound, "GET", "/api/v1/no-such-route", nil)
		requireKeys(t, "404 body", r.Body, "error")
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/push", "")
		if !strings.Contains(string(r.Body), "Empty request body") {
			t.Errorf("empty push body: %s, want error \"Empty request body\"", r)
		}
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/push", "{nope")
		if !strings.Contains(string(r.Body), "Invalid JSON") {
			t.Errorf("bad JSON push body: %s, want error \"Invalid JSON: ...\"", r)
		}
	})

	t.Run("configure", func(t *testing.T) {
		c := n.api(t)
		r := c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{
			"queue": "walk-orders", "namespace": "billing", "task": "invoice",
			"options": map[string]any{"leaseTime": 30, "retryLimit": 5, "retryDelay": 1000, "priority": 3, "ttl": 3600},
		})
		var cfg struct {
			Configured  bool           `json:"configured"`
			QueueID     string         `json:"queueId"`
			PartitionID string         `json:"partitionId"`
			Queue       string         `json:"queue"`
			Namespace   string         `json:"namespace"`
			Task        string         `json:"task"`
			Options     map[string]any `json:"options"`
		}
		r.decode(t, &cfg)
		if !cfg.Configured || cfg.Queue != "walk-orders" || cfg.Namespace != "billing" || cfg.Task != "invoice" {
			t.Errorf("configure answered %s", r)
		}
		requireUUID(t, "queueId", cfg.QueueID)
		requireUUID(t, "partitionId", cfg.PartitionID)
		for _, k := range []string{"priority", "leaseTime", "retryLimit", "retryDelay", "maxSize", "ttl", "deadLetterQueue",
			"dlqAfterMaxRetries", "delayedProcessing", "windowBuffer", "retentionSeconds", "completedRetentionSeconds",
			"retentionEnabled", "encryptionEnabled", "maxWaitTimeSeconds"} {
			if _, ok := cfg.Options[k]; !ok {
				t.Errorf("configure options: %q not echoed: %s", k, r)
			}
		}
		for k, want := range map[string]float64{"leaseTime": 30, "retryLimit": 5, "retryDelay": 1000, "priority": 3, "ttl": 3600} {
			if got, _ := cfg.Options[k].(float64); got != want {
				t.Errorf("configure options.%s = %v, want %v", k, cfg.Options[k], want)
			}
		}
		// 2.0 merges: an option not named keeps its value.
		r = c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "walk-orders", "options": map[string]any{"retryLimit": 2}})
		var cfg2 struct {
			PartitionID string         `json:"partitionId"`
			Options     map[string]any `json:"options"`
		}
		r.decode(t, &cfg2)
		if cfg2.Options["retryLimit"] != float64(2) || cfg2.Options["leaseTime"] != float64(30) {
			t.Errorf("reconfigure {retryLimit:2}: %s; want retryLimit 2 and leaseTime kept at 30 (merge)", r)
		}
		if cfg2.PartitionID != cfg.PartitionID {
			t.Errorf("reconfigure changed the Default partition id: %s -> %s", cfg.PartitionID, cfg2.PartitionID)
		}
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/configure", map[string]any{"options": map[string]any{}})
		if !strings.Contains(string(r.Body), "queue is required") {
			t.Errorf("configure without queue: %s, want {\"error\":\"queue is required\"}", r)
		}
	})

	t.Run("push", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-push"
		r := c.mustStatus(http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": q, "payload": map[string]any{"orderId": 1}, "transactionId": "order-1"},
			map[string]any{"queue": q, "payload": map[string]any{"orderId": 2}, "transactionId": "order-2"},
		}})
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("push Content-Type = %q", ct)
		}
		var raws []json.RawMessage
		r.decode(t, &raws)
		if len(raws) != 2 {
			t.Fatalf("push of 2 answered %s", r)
		}
		for _, raw := range raws {
			requireKeys(t, "push result", raw, "index", "status", "transaction_id", "transactionId", "message_id",
				"messageId", "partition_id", "partitionId", "trace_id", "queueName")
		}
		var res []pushResult
		r.decode(t, &res)
		for i, p := range res {
			if p.Index != i || p.Status != "queued" || p.QueueName != q {
				t.Errorf("push result %d: %+v", i, p)
			}
			if p.MessageIDSn != p.MessageID || p.TransactionIDSn != p.TransactionID || p.PartitionIDSn != p.PartitionID {
				t.Errorf("push result %d: the two id spellings differ: %+v", i, p)
			}
			requireUUID(t, "message_id", p.MessageID)
			requireUUID(t, "partition_id", p.PartitionID)
		}
		if res[0].TransactionID != "order-1" || res[1].TransactionID != "order-2" {
			t.Errorf("push results out of request order: %+v", res)
		}
		if res[0].MessageID == res[1].MessageID {
			t.Errorf("two messages share id %s", res[0].MessageID)
		}
		orig := res[0]

		// Dedup: the same transactionId in the same partition.
		dup := c.pushOne(pushItem{Queue: q, TransactionID: "order-1", Payload: map[string]any{"orderId": 99}}, "duplicate")
		if dup.MessageID != orig.MessageID || dup.MessageIDSn != orig.MessageID {
			t.Errorf("duplicate answered message_id %s / messageId %s, want the original %s", dup.MessageIDSn, dup.MessageID, orig.MessageID)
		}
		if dup.PartitionID != orig.PartitionID {
			t.Errorf("duplicate partitionId %s, want %s", dup.PartitionID, orig.PartitionID)
		}
		// ... but another partition is another scope.
		other := c.pushOne(pushItem{Queue: q, Partition: "eu", TransactionID: "order-1", Payload: map[string]any{"orderId": 1}}, "queued")
		if other.MessageID == orig.MessageID || other.PartitionID == orig.PartitionID {
			t.Errorf("same transactionId in partition eu: %+v, want a new message in a new partition", other)
		}
		// Duplicates inside one request: the first wins.
		in := c.push(pushItem{Queue: q, TransactionID: "order-3"}, pushItem{Queue: q, TransactionID: "order-3"})
		if in[0].Status != "queued" || in[1].Status != "duplicate" || in[1].MessageID != in[0].MessageID {
			t.Errorf("duplicate inside one request: %+v", in)
		}
		// A missing transactionId is minted.
		minted := c.pushOne(pushItem{Queue: q, Payload: "x"}, "queued")
		if minted.TransactionID == "" {
			t.Errorf("push without transactionId: none minted: %+v", minted)
		}
		// Shapes refused with 400, empty items accepted.
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/push", map[string]any{})
		if !strings.Contains(string(r.Body), "items array is required") {
			t.Errorf("push {}: %s", r)
		}
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"payload": 1}}})
		if !strings.Contains(string(r.Body), "Queue must be a string") {
			t.Errorf("push without queue: %s", r)
		}
		r = c.mustStatus(http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": []any{}})
		if strings.TrimSpace(string(r.Body)) != "[]" {
			t.Errorf("push of no items: %s, want 201 []", r)
		}
	})

	t.Run("pop_and_ack", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-pop"
		popPath := "/api/v1/pop/queue/" + q
		if p := c.pop(popPath, nil); p != nil {
			t.Fatalf("pop of a queue that does not exist: %+v, want 204", p)
		}
		r := c.mustStatus(http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": q, "payload": map[string]any{"n": 1}, "transactionId": "p-1"},
			map[string]any{"queue": q, "payload": nil, "transactionId": "p-2"},
			map[string]any{"queue": q, "payload": map[string]any{}, "transactionId": "p-3"},
		}})
		var pushed []pushResult
		r.decode(t, &pushed)

		r = c.mustStatus(200, "GET", popPath+"/partition/Default?batch=2", nil)
		top := requireKeys(t, "pop body", r.Body, "success", "queue", "partition", "partitionId", "leaseId",
			"consumerGroup", "partitionsClaimed", "messages")
		var msgs []json.RawMessage
		if err := json.Unmarshal(top["messages"], &msgs); err != nil || len(msgs) != 2 {
			t.Fatalf("pop batch=2: %s, want 2 messages", r)
		}
		for _, m := range msgs {
			requireKeys(t, "pop message", m, "id", "transactionId", "traceId", "data", "producerSub", "createdAt",
				"queue", "partition", "partitionId", "leaseId", "consumerGroup", "retryCount")
		}
		var p popResponse
		r.decode(t, &p)
		if !p.Success || p.Queue != q || p.Partition != "Default" || p.PartitionID != pushed[0].PartitionID ||
			p.ConsumerGroup != "__QUEUE_MODE__" || p.PartitionsClaimed != 1 || p.LeaseID == "" {
			t.Errorf("pop top level: %s", r)
		}
		for i, m := range p.Messages {
			if m.TransactionID != pushed[i].TransactionID || m.ID != pushed[i].MessageID {
				t.Errorf("pop message %d: %s/%s, want %s/%s (FIFO)", i, m.TransactionID, m.ID, pushed[i].TransactionID, pushed[i].MessageID)
			}
			if m.LeaseID != p.LeaseID || m.PartitionID != p.PartitionID || m.Partition != "Default" || m.Queue != q ||
				m.ConsumerGroup != "__QUEUE_MODE__" || m.RetryCount != 0 {
				t.Errorf("pop message %d: %+v", i, m)
			}
			if !popCreatedAt.MatchString(m.CreatedAt) {
				t.Errorf("pop message %d createdAt %q, want ISO-8601 UTC with microseconds", i, m.CreatedAt)
			}
		}
		if !jsonEq(p.Messages[0].Data, []byte(`{"n":1}`)) || !jsonEq(p.Messages[1].Data, []byte(`null`)) {
			t.Errorf("payloads did not round-trip: %s / %s", p.Messages[0].Data, p.Messages[1].Data)
		}
		// The lease is per partition and group: nothing more for queue mode.
		if p2 := c.pop(popPath, qv("batch", "10")); p2 != nil {
			t.Errorf("pop while the only partition is leased: %+v, want 204", p2)
		}

		a := c.ack(ackReq{TransactionID: "p-1", PartitionID: p.PartitionID, LeaseID: p.LeaseID, Status: "completed"})
		if !a.Success || a.LeaseReleased || a.DLQ || a.TransactionID != "p-1" || a.Index != 0 ||
			deref(a.QueueName) != q || deref(a.PartitionName) != "Default" {
			t.Errorf("ack p-1 (1 of 2 delivered): %+v", a)
		}
		a = c.ack(ackReq{TransactionID: "p-2", PartitionID: p.PartitionID, LeaseID: p.LeaseID})
		if !a.Success || !a.LeaseReleased {
			t.Errorf("ack p-2 (last of the lease): %+v, want success and leaseReleased", a)
		}
		p3 := c.pop(popPath, qv("batch", "10"))
		if p3 == nil || len(p3.Messages) != 1 || p3.Messages[0].TransactionID != "p-3" {
			t.Fatalf("pop after acking p-1,p-2: %+v, want p-3", p3)
		}
		if !jsonEq(p3.Messages[0].Data, []byte(`{}`)) {
			t.Errorf("payload {} came back as %s", p3.Messages[0].Data)
		}
		a = c.ack(ackReq{TransactionID: "p-3", PartitionID: p3.PartitionID, LeaseID: p3.LeaseID})
		if !a.Success || !a.LeaseReleased {
			t.Errorf("ack p-3: %+v", a)
		}
		if pe := c.pop(popPath, qv("batch", "10")); pe != nil {
			t.Errorf("pop of an exhausted queue: %+v, want 204", pe)
		}
		// Refusals.
		a = c.ack(ackReq{TransactionID: "no-such-txn", PartitionID: p.PartitionID})
		if a.Success || deref(a.Error) != "Message not found" {
			t.Errorf("ack of an unknown message: %+v, want success:false error \"Message not found\"", a)
		}
		r = c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/ack", map[string]any{"transactionId": "p-1"})
		if !strings.Contains(string(r.Body), "partitionId is required") {
			t.Errorf("ack without partitionId: %s", r)
		}
	})

	t.Run("failed_ack_to_dlq", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-dlq"
		c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"retryLimit": 1, "retryDelay": 50}})
		pushed := c.pushOne(pushItem{Queue: q, TransactionID: "d-1", Payload: map[string]any{"message": "poison"}}, "queued")
		deliveries := 0
		var last ackResult
		for i := 0; i < 5; i++ {
			p := c.pop("/api/v1/pop/queue/"+q, qv("wait", "true", "timeout", "3000"))
			if p == nil {
				break
			}
			deliveries++
			m := p.Messages[0]
			if m.TransactionID != "d-1" {
				t.Fatalf("delivery %d: %+v", deliveries, m)
			}
			if m.RetryCount != deliveries-1 {
				t.Errorf("delivery %d: retryCount %d, want %d", deliveries, m.RetryCount, deliveries-1)
			}
			last = c.ack(ackReq{TransactionID: "d-1", PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "failed",
				Error: strp("boom " + string(rune('0'+deliveries)))})
			if !last.Success {
				t.Fatalf("failed ack %d refused: %+v", deliveries, last)
			}
			if deliveries == 1 && (last.DLQ || !last.LeaseReleased) {
				t.Errorf("first failed ack (retry 0 < retryLimit 1): %+v, want dlq:false leaseReleased:true", last)
			}
			if last.DLQ {
				break
			}
		}
		if deliveries != 2 || !last.DLQ {
			t.Errorf("retryLimit 1: %d deliveries, last ack %+v; want 2 deliveries and the second failed ack dlq:true", deliveries, last)
		}
		if p := c.pop("/api/v1/pop/queue/"+q, qv("wait", "true", "timeout", "300")); p != nil {
			t.Errorf("pop after the message went to the DLQ: %+v, want 204", p)
		}
		r := c.mustStatus(200, "GET", "/api/v1/dlq?queue="+q, nil)
		requireKeys(t, "dlq body", r.Body, "messages", "total", "limit", "offset", "pagination")
		var d struct {
			Messages []struct {
				ID            string          `json:"id"`
				TransactionID string          `json:"transactionId"`
				PartitionID   string          `json:"partitionId"`
				Queue         string          `json:"queue"`
				Partition     string          `json:"partition"`
				ConsumerGroup string          `json:"consumerGroup"`
				ErrorMessage  string          `json:"errorMessage"`
				RetryCount    int             `json:"retryCount"`
				Data          json.RawMessage `json:"data"`
			} `json:"messages"`
			Total int `json:"total"`
		}
		r.decode(t, &d)
		if d.Total != 1 || len(d.Messages) != 1 {
			t.Fatalf("GET /dlq?queue=%s: %s, want exactly 1 entry", q, r)
		}
		e := d.Messages[0]
		if e.TransactionID != "d-1" || e.ID != pushed.MessageID || e.PartitionID != pushed.PartitionID || e.Queue != q ||
			e.Partition != "Default" || e.ConsumerGroup != "__QUEUE_MODE__" || e.RetryCount != 1 ||
			!strings.Contains(e.ErrorMessage, "boom 2") || !jsonEq(e.Data, []byte(`{"message":"poison"}`)) {
			t.Errorf("DLQ entry: %s", r)
		}
	})

	t.Run("transaction", func(t *testing.T) {
		c := n.api(t)
		const qa, qb = "walk-txa", "walk-txb"
		c.pushOne(pushItem{Queue: qa, TransactionID: "a-1", Payload: 1}, "queued")
		p := c.pop("/api/v1/pop/queue/"+qa, nil)
		if p == nil {
			t.Fatal("pop A: 204")
		}
		txn := func(ops ...map[string]any) map[string]any {
			r := c.mustStatus(200, "POST", "/api/v1/transaction", map[string]any{"operations": ops})
			var out map[string]any
			r.decode(t, &out)
			return out
		}
		ok := txn(
			map[string]any{"type": "ack", "transactionId": "a-1", "partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": "completed"},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": qb, "payload": map[string]any{"ok": true}, "transactionId": "rcpt-1"}}},
		)
		if ok["success"] != true {
			t.Fatalf("transaction ack A + push B: %v", ok)
		}
		if res, _ := ok["results"].([]any); len(res) != 2 {
			t.Errorf("transaction results: %v, want 2 (one ack, one push)", ok["results"])
		}
		if pa := c.pop("/api/v1/pop/queue/"+qa, nil); pa != nil {
			t.Errorf("A after the committed transaction: %+v, want 204", pa)
		}
		pb := c.pop("/api/v1/pop/queue/"+qb, nil)
		if pb == nil || pb.Messages[0].TransactionID != "rcpt-1" {
			t.Fatalf("B after the committed transaction: %+v, want rcpt-1", pb)
		}
		c.ackAll(pb, nil)

		// All or nothing: a refused ack leaves no push behind.
		c.pushOne(pushItem{Queue: qa, TransactionID: "a-2", Payload: 2}, "queued")
		p2 := c.pop("/api/v1/pop/queue/"+qa, nil)
		if p2 == nil {
			t.Fatal("pop A (a-2): 204")
		}
		bad := txn(
			map[string]any{"type": "ack", "transactionId": "a-2", "partitionId": p2.PartitionID, "leaseId": "not-the-live-lease", "status": "completed"},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": qb, "payload": 2, "transactionId": "rcpt-2"}}},
		)
		if bad["success"] != false || bad["reason"] != "rejected_ack" {
			t.Errorf("transaction with a stale leaseId: %v, want success:false reason:rejected_ack", bad)
		}
		if pb := c.pop("/api/v1/pop/queue/"+qb, nil); pb != nil {
			t.Errorf("B after the refused transaction: %+v, want 204 (no push)", pb)
		}
		// An ack of a message that does not exist also aborts the bundle.
		bad = txn(
			map[string]any{"type": "ack", "transactionId": "no-such", "partitionId": p2.PartitionID, "status": "completed"},
			map[string]any{"type": "push", "items": []any{map[string]any{"queue": qb, "payload": 3, "transactionId": "rcpt-3"}}},
		)
		if bad["success"] != false {
			t.Errorf("transaction acking a missing message: %v, want success:false", bad)
		}
		// Neither refused bundle left a dedup record: both ids are new.
		c.pushOne(pushItem{Queue: qb, TransactionID: "rcpt-2", Payload: 2}, "queued")
		c.pushOne(pushItem{Queue: qb, TransactionID: "rcpt-3", Payload: 3}, "queued")
		// And a-2 is still leased to p2's lease, cursor unmoved.
		a := c.ack(ackReq{TransactionID: "a-2", PartitionID: p2.PartitionID, LeaseID: p2.LeaseID})
		if !a.Success || !a.LeaseReleased {
			t.Errorf("ack a-2 with its live lease after the refused transaction: %+v", a)
		}
	})

	t.Run("lease_extend", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-lease"
		c.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 2}})
		c.pushOne(pushItem{Queue: q, TransactionID: "l-1", Payload: 1}, "queued")
		c.pushOne(pushItem{Queue: q, Partition: "other", TransactionID: "l-2", Payload: 2}, "queued")
		p1 := c.pop("/api/v1/pop/queue/"+q+"/partition/Default", nil)
		p2 := c.pop("/api/v1/pop/queue/"+q+"/partition/other", nil)
		if p1 == nil || p2 == nil {
			t.Fatalf("pops: %+v %+v", p1, p2)
		}
		r := c.mustStatus(200, "POST", "/api/v1/lease/"+url.PathEscape(p1.LeaseID)+"/extend", map[string]any{"seconds": 30})
		var ext []map[string]any
		r.decode(t, &ext)
		if len(ext) != 1 || ext[0]["success"] != true || ext[0]["leaseId"] != p1.LeaseID || ext[0]["expiresAt"] == nil {
			t.Errorf("extend: %s, want [{leaseId, success:true, expiresAt}]", r)
		}
		r = c.mustStatus(200, "POST", "/api/v1/lease/no-such-lease/extend", "{}")
		ext = nil
		r.decode(t, &ext)
		if len(ext) != 1 || ext[0]["success"] != false || ext[0]["error"] == nil {
			t.Errorf("extend of an unknown lease: %s, want [{success:false, error}]", r)
		}
		time.Sleep(2500 * time.Millisecond) // leaseTime 2 s has passed
		if p := c.pop("/api/v1/pop/queue/"+q+"/partition/Default", nil); p != nil {
			t.Errorf("pop of the extended partition: %+v, want 204 (lease still held)", p)
		}
		again := c.pop("/api/v1/pop/queue/"+q+"/partition/other", nil)
		if again == nil || again.Messages[0].TransactionID != "l-2" || again.LeaseID == p2.LeaseID || again.Messages[0].RetryCount != 0 {
			t.Errorf("pop of the expired partition: %+v, want l-2 again under a new lease, retryCount 0", again)
		}
		a := c.ack(ackReq{TransactionID: "l-2", PartitionID: p2.PartitionID, LeaseID: p2.LeaseID})
		if a.Success || deref(a.Error) != "Invalid or expired lease" {
			t.Errorf("ack with the expired lease: %+v, want success:false \"Invalid or expired lease\"", a)
		}
		a = c.ack(ackReq{TransactionID: "l-1", PartitionID: p1.PartitionID, LeaseID: p1.LeaseID})
		if !a.Success || !a.LeaseReleased {
			t.Errorf("ack with the extended lease after leaseTime: %+v, want success", a)
		}
		if again != nil {
			a = c.ack(ackReq{TransactionID: "l-2", PartitionID: again.PartitionID, LeaseID: again.LeaseID})
			if !a.Success {
				t.Errorf("ack of l-2 with the new lease: %+v", a)
			}
		}
	})

	t.Run("long_poll", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-poll"
		start := time.Now()
		if p := c.pop("/api/v1/pop/queue/"+q, qv("wait", "false")); p != nil || time.Since(start) > time.Second {
			t.Errorf("wait=false pop of an empty queue: %+v after %v, want 204 at once", p, time.Since(start))
		}
		start = time.Now()
		if p := c.pop("/api/v1/pop/queue/"+q, qv("wait", "true", "timeout", "400")); p != nil {
			t.Errorf("long-poll with nothing to get: %+v", p)
		}
		if el := time.Since(start); el < 400*time.Millisecond || el > 3*time.Second {
			t.Errorf("long-poll timeout=400 answered after %v, want about its timeout", el)
		}
		// A pop parked for 10 s is woken by a push, long before its timeout
		// (half of it is a bound no wake-up misses, and a pop sleeping its
		// timeout out cannot meet).
		type got struct {
			r   *response
			err error
			at  time.Time
		}
		const wait = 10 * time.Second
		ch := make(chan got, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
			defer cancel()
			r, err := n.do(ctx, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?wait=true&timeout=%d", q, wait.Milliseconds()), nil)
			ch <- got{r, err, time.Now()}
		}()
		c.waitParked(1)
		pushed := time.Now()
		c.pushOne(pushItem{Queue: q, TransactionID: "lp-1", Payload: "wake"}, "queued")
		var g got
		select {
		case g = <-ch:
		case <-time.After(wait / 2):
			t.Fatalf("a long-poll pop parked for %v had not returned %v after a push it could take", wait, wait/2)
		}
		if g.err != nil {
			t.Fatalf("long-poll pop: %v", g.err)
		}
		if g.r.Status != 200 {
			t.Fatalf("long-poll pop woken by a push: %s, want 200", g.r)
		}
		var p popResponse
		g.r.decode(t, &p)
		if len(p.Messages) != 1 || p.Messages[0].TransactionID != "lp-1" {
			t.Errorf("long-poll pop: %s", g.r)
		}
		t.Logf("the parked long-poll pop answered %v after the push was sent", g.at.Sub(pushed))
		c.ackAll(&p, nil)
	})

	t.Run("queues", func(t *testing.T) {
		c := n.api(t)
		const q = "walk-res"
		c.push(pushItem{Queue: q, TransactionID: "r-1", Payload: 1}, pushItem{Queue: q, TransactionID: "r-2", Payload: 2},
			pushItem{Queue: q, Partition: "x", TransactionID: "r-3", Payload: 3})
		r := c.mustStatus(200, "GET", "/api/v1/resources/queues", nil)
		var list struct {
			Queues []struct {
				ID         string         `json:"id"`
				Name       string         `json:"name"`
				Partitions int            `json:"partitions"`
				Messages   map[string]int `json:"messages"`
			} `json:"queues"`
		}
		r.decode(t, &list)
		found := false
		for _, e := range list.Queues {
			if e.Name == q {
				found = true
				requireUUID(t, "queue id", e.ID)
				if e.Partitions != 2 || e.Messages["total"] != 3 {
					t.Errorf("queue list entry for %s: %+v, want 2 partitions, 3 messages", q, e)
				}
			}
		}
		if !found {
			t.Errorf("queue list lacks %s: %s", q, r)
		}
		raw := c.queueDetail(q)
		if raw == nil {
			t.Fatalf("queue detail %s: 404", q)
		}
		requireKeys(t, "queue detail", raw, "id", "name", "namespace", "task", "createdAt", "partitions", "totals")
		var det struct {
			Partitions []struct {
				Name  string         `json:"name"`
				Stats map[string]int `json:"stats"`
			} `json:"partitions"`
			Totals map[string]int `json:"totals"`
		}
		if err := json.Unmarshal(raw, &det); err != nil {
			t.Fatal(err)
		}
		if len(det.Partitions) != 2 || det.Totals["total"] != 3 {
			t.Errorf("queue detail: %s", raw)
		}
		r = c.mustStatus(http.StatusNotFound, "GET", "/api/v1/resources/queues/walk-no-such-queue", nil)
		if !strings.Contains(string(r.Body), "Queue not found") {
			t.Errorf("detail of an unknown queue: %s", r)
		}
		var del map[string]any
		c.mustStatus(200, "DELETE", "/api/v1/resources/queues/"+q, nil).decode(t, &del)
		if del["deleted"] != true || del["queue"] != q || del["existed"] != true {
			t.Errorf("delete queue: %v", del)
		}
		del = nil
		c.mustStatus(200, "DELETE", "/api/v1/resources/queues/"+q, nil).decode(t, &del)
		if del["deleted"] != true || del["existed"] != false {
			t.Errorf("second delete (idempotent): %v, want deleted:true existed:false", del)
		}
		if c.queueDetail(q) != nil {
			t.Errorf("queue detail after delete: want 404")
		}
		if p := c.pop("/api/v1/pop/queue/"+q, nil); p != nil {
			t.Errorf("pop of a deleted queue: %+v", p)
		}
		// The messages went with the queue, and so did their dedup records.
		c.pushOne(pushItem{Queue: q, TransactionID: "r-1", Payload: 1}, "queued")
		c.mustStatus(200, "DELETE", "/api/v1/resources/queues/"+q, nil)
	})

	t.Run("kv", func(t *testing.T) {
		c := n.api(t)
		kv := func(ops ...map[string]any) []map[string]any {
			r := c.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": ops})
			var out struct {
				Results []map[string]any `json:"results"`
			}
			r.decode(t, &out)
			if len(out.Results) != len(ops) {
				t.Fatalf("kv with %d ops answered %s", len(ops), r)
			}
			return out.Results
		}
		kv(map[string]any{"op": "get", "ns": "probe", "key": "probe"}) // the seed's probe
		put := kv(map[string]any{"op": "put", "ns": "walk", "key": "user:1", "value": map[string]any{"name": "ada"}, "ttlSeconds": 60})[0]
		if put["applied"] != true {
			t.Fatalf("kv put: %v", put)
		}
		get := kv(map[string]any{"op": "get", "ns": "walk", "key": "user:1"}, map[string]any{"op": "get", "ns": "walk", "key": "user:2"})
		val, _ := json.Marshal(get[0]["value"])
		if get[0]["found"] != true || !jsonEq(val, []byte(`{"name":"ada"}`)) || get[0]["version"] != put["version"] {
			t.Errorf("kv get after put: %v (put answered %v)", get[0], put)
		}
		if get[1]["found"] != false {
			t.Errorf("kv get of a missing key: %v", get[1])
		}
		pia := kv(map[string]any{"op": "putIfAbsent", "ns": "walk", "key": "user:1", "value": 2, "forever": true})[0]
		if pia["applied"] != false || pia["reason"] != "exists" {
			t.Errorf("putIfAbsent of an existing key: %v, want applied:false reason:exists", pia)
		}
		r := c.mustStatus(http.StatusBadRequest, "POST", "/api/v1/kv", map[string]any{"operations": []any{
			map[string]any{"op": "put", "ns": "walk", "key": "k", "value": 1}}})
		if !strings.Contains(string(r.Body), "kv_expiry_not_specified") {
			t.Errorf("kv put without expiry: %s", r)
		}
		// KV is independent of queues.
		c.pushOne(pushItem{Queue: "walk-kvq", TransactionID: "k-1"}, "queued")
		c.mustStatus(200, "DELETE", "/api/v1/resources/queues/walk-kvq", nil)
		if g := kv(map[string]any{"op": "get", "ns": "walk", "key": "user:1"})[0]; g["found"] != true {
			t.Errorf("kv entry gone after a queue delete: %v", g)
		}
	})
	n.requireRunning()
}
