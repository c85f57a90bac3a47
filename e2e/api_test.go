package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Wire shapes of spec/http-api.md, as a client reads them.

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
}

type pushResult struct {
	Index           int     `json:"index"`
	Status          string  `json:"status"`
	TransactionIDSn string  `json:"transaction_id"`
	TransactionID   string  `json:"transactionId"`
	MessageIDSn     string  `json:"message_id"`
	MessageID       string  `json:"messageId"`
	PartitionIDSn   string  `json:"partition_id"`
	PartitionID     string  `json:"partitionId"`
	QueueName       string  `json:"queueName"`
	Error           *string `json:"error"`
}

type popMessage struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data"`
	ProducerSub   *string         `json:"producerSub"`
	CreatedAt     string          `json:"createdAt"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	RetryCount    int             `json:"retryCount"`
}

type popResponse struct {
	Success           bool         `json:"success"`
	Queue             string       `json:"queue"`
	Partition         string       `json:"partition"`
	PartitionID       string       `json:"partitionId"`
	LeaseID           string       `json:"leaseId"`
	ConsumerGroup     string       `json:"consumerGroup"`
	PartitionsClaimed int          `json:"partitionsClaimed"`
	Messages          []popMessage `json:"messages"`
}

type ackResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
}

// ackReq is one ack (POST /ack body, or an /ack/batch element).
type ackReq struct {
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	ConsumerGroup *string `json:"consumerGroup,omitempty"`
	LeaseID       string  `json:"leaseId,omitempty"`
	Status        string  `json:"status,omitempty"`
	Error         *string `json:"error,omitempty"`
}

// api runs requests against a node on behalf of one test (or subtest):
// its helpers fail that test.
type api struct {
	t testing.TB
	n *node
}

func (n *node) api(t testing.TB) *api { return &api{t: t, n: n} }

// must sends one request and fails the test on a transport error.
func (a *api) must(method, path string, body any) *response {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := a.n.do(ctx, method, path, body)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// mustStatus is must plus a status check.
func (a *api) mustStatus(want int, method, path string, body any) *response {
	a.t.Helper()
	r := a.must(method, path, body)
	if r.Status != want {
		a.t.Fatalf("%s %s: got %s, want HTTP %d", method, path, r, want)
	}
	return r
}

func strp(s string) *string { return &s }

// push posts items and requires 201 with one result per item.
func (a *api) push(items ...pushItem) []pushResult {
	a.t.Helper()
	r := a.mustStatus(http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": items})
	var out []pushResult
	r.decode(a.t, &out)
	if len(out) != len(items) {
		a.t.Fatalf("push of %d items answered %d results: %s", len(items), len(out), r)
	}
	return out
}

// pushOne pushes one item and requires the given status.
func (a *api) pushOne(it pushItem, wantStatus string) pushResult {
	a.t.Helper()
	res := a.push(it)[0]
	if res.Status != wantStatus {
		a.t.Fatalf("push %+v: status %q (error %v), want %q", it, res.Status, deref(res.Error), wantStatus)
	}
	return res
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// pop runs GET path?q. It returns nil for 204 (and checks the body is
// empty), the decoded body for 200, and fails on anything else.
func (a *api) pop(path string, q url.Values) *popResponse {
	a.t.Helper()
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	r := a.must("GET", path, nil)
	switch r.Status {
	case http.StatusNoContent:
		if len(r.Body) != 0 {
			a.t.Errorf("GET %s: 204 with a body %q; spec §4.3: 204 has no body", path, r.Body)
		}
		return nil
	case http.StatusOK:
		var p popResponse
		r.decode(a.t, &p)
		if len(p.Messages) == 0 {
			a.t.Errorf("GET %s: 200 with no messages; spec: an empty pop is 204: %s", path, r)
		}
		return &p
	}
	a.t.Fatalf("GET %s: %s, want 200 or 204", path, r)
	return nil
}

// ack posts one ack and requires 200 with an array of exactly one item.
func (a *api) ack(req ackReq) ackResult {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/ack", req)
	var out []ackResult
	r.decode(a.t, &out)
	if len(out) != 1 {
		a.t.Fatalf("POST /ack answered %d items, want an array of 1: %s", len(out), r)
	}
	return out[0]
}

// ackBatch posts /ack/batch and requires 200 with one result per ack.
func (a *api) ackBatch(group *string, acks []ackReq) []ackResult {
	a.t.Helper()
	body := map[string]any{"acknowledgments": acks}
	if group != nil {
		body["consumerGroup"] = *group
	}
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/ack/batch", body)
	var out []ackResult
	r.decode(a.t, &out)
	if len(out) != len(acks) {
		a.t.Fatalf("POST /ack/batch of %d answered %d: %s", len(acks), len(out), r)
	}
	return out
}

// ackAll acks every message of p as completed with its lease, in one
// /ack/batch, and fails the test unless every ack succeeded.
func (a *api) ackAll(p *popResponse, group *string) {
	a.t.Helper()
	acks := make([]ackReq, len(p.Messages))
	for i, m := range p.Messages {
		acks[i] = ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "completed"}
	}
	for i, r := range a.ackBatch(group, acks) {
		if !r.Success {
			a.t.Fatalf("ack of %s in %s: success=false error=%s", acks[i].TransactionID, acks[i].PartitionID, deref(r.Error))
		}
	}
}

// queueDetail is GET /api/v1/resources/queues/:q as raw JSON (nil on 404).
func (a *api) queueDetail(q string) json.RawMessage {
	a.t.Helper()
	r := a.must("GET", "/api/v1/resources/queues/"+url.PathEscape(q), nil)
	switch r.Status {
	case http.StatusOK:
		return r.Body
	case http.StatusNotFound:
		return nil
	}
	a.t.Fatalf("queue detail %s: %s", q, r)
	return nil
}

// queueTotals returns the totals of a queue's detail.
func (a *api) queueTotals(q string) map[string]int {
	a.t.Helper()
	raw := a.queueDetail(q)
	if raw == nil {
		a.t.Fatalf("queue %s not found", q)
	}
	var d struct {
		Totals map[string]int `json:"totals"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		a.t.Fatalf("queue detail %s: %v", q, err)
	}
	return d.Totals
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
