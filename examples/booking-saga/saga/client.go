package saga

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// client speaks the routes of the Queen HTTP API the saga needs: configure,
// push, pop, transaction, KV, the timer peek/count routes and the queue
// detail. Every call is bounded by its context and a per-request timeout.
type client struct {
	base    string
	hc      *http.Client
	popWait time.Duration // long-poll limit of one pop
	retries atomic.Int64  // answers that were retried (503, 429, 500, 409, transport)
}

// errStatus is an answer the saga did not expect.
type errStatus struct {
	method, path string
	status       int
	body         string
}

func (e *errStatus) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s", e.method, e.path, e.status, strings.TrimSpace(e.body))
}

// retryable reports whether an answer is worth another try: the node is
// electing a leader or not sure of a write (503), a rate is spent (429), an
// internal error (500), or a request with the same Idempotency-Key is still
// being applied (409).
func retryable(status int, idem bool) bool {
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusInternalServerError:
		return true
	case http.StatusConflict:
		return idem
	}
	return false
}

// do sends one request and retries retryable answers and transport errors
// with an exponential backoff (25 ms doubling to 1 s) until ctx ends.
//
// A retry is safe for every request the saga sends: reads are reads, a push
// carries a deterministic transactionId (a repeat is a "duplicate"), and
// every commit carries an Idempotency-Key, so a retry of a commit whose
// first attempt landed is answered from the broker's record of it instead of
// running again.
func (c *client) do(ctx context.Context, method, path string, body any, idemKey string, timeout time.Duration) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	backoff := 25 * time.Millisecond
	for {
		status, b, err := c.once(ctx, method, path, raw, idemKey, timeout)
		if err == nil && !retryable(status, idemKey != "") {
			return status, b, nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = &errStatus{method, path, status, string(b)}
			}
			return 0, nil, fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// once sends one request without retrying.
func (c *client) once(ctx context.Context, method, path string, raw []byte, idemKey string, timeout time.Duration) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(rctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// expect requires one status and returns the body.
func (c *client) expect(ctx context.Context, want int, method, path string, body any, idemKey string) ([]byte, error) {
	status, b, err := c.do(ctx, method, path, body, idemKey, 15*time.Second)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, &errStatus{method, path, status, string(b)}
	}
	return b, nil
}

// configure creates a queue with the saga's lease and retry settings.
func (c *client) configure(ctx context.Context, queue string, leaseSeconds int) error {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/configure", map[string]any{
		"queue":   queue,
		"options": map[string]any{"leaseTime": leaseSeconds, "retryLimit": 3},
	}, "")
	if err != nil {
		return err
	}
	var out struct {
		Configured bool `json:"configured"`
	}
	if err := json.Unmarshal(b, &out); err != nil || !out.Configured {
		return fmt.Errorf("configure %s: %s", queue, b)
	}
	return nil
}

type pushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	TransactionID string `json:"transactionId"`
	Payload       any    `json:"payload"`
}

// push posts items and requires each to come back queued (or duplicate,
// when a retried request had already landed).
func (c *client) push(ctx context.Context, items []pushItem) error {
	b, err := c.expect(ctx, http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": items}, "")
	if err != nil {
		return err
	}
	var out []struct {
		Status string  `json:"status"`
		Error  *string `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("push: %v: %s", err, b)
	}
	if len(out) != len(items) {
		return fmt.Errorf("push of %d items answered %d results", len(items), len(out))
	}
	for i, r := range out {
		if r.Status != "queued" && r.Status != "duplicate" {
			return fmt.Errorf("push of %s came back %q (%v)", items[i].TransactionID, r.Status, r.Error)
		}
	}
	return nil
}

// message is one delivered message, with the lease it came under.
type message struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	CreatedAt     string          `json:"createdAt"`
	Data          json.RawMessage `json:"data"`
}

// pop long-polls one message for group (batch=1). It returns nil, nil for
// an empty pop (204): nothing arrived within the long-poll limit.
func (c *client) pop(ctx context.Context, queue, group string) ([]message, error) {
	q := url.Values{}
	q.Set("consumerGroup", group)
	q.Set("subscriptionMode", "all")
	q.Set("batch", "1")
	q.Set("wait", "true")
	q.Set("timeout", strconv.FormatInt(c.popWait.Milliseconds(), 10))
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?" + q.Encode()
	status, b, err := c.do(ctx, "GET", path, nil, "", c.popWait+10*time.Second)
	if err != nil {
		return nil, err
	}
	switch status {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		var out struct {
			LeaseID  string    `json:"leaseId"`
			Messages []message `json:"messages"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("pop: %v: %s", err, b)
		}
		for i := range out.Messages {
			if out.Messages[i].LeaseID == "" {
				out.Messages[i].LeaseID = out.LeaseID
			}
		}
		return out.Messages, nil
	}
	return nil, &errStatus{"GET", path, status, string(b)}
}

// ackOp is the ack of m under its lease, as an op of a transaction.
func ackOp(m message) map[string]any {
	return map[string]any{
		"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"consumerGroup": m.ConsumerGroup, "leaseId": m.LeaseID, "status": "completed",
	}
}

// verdict is the answer to POST /api/v1/transaction (always HTTP 200).
type verdict struct {
	Success     bool            `json:"success"`
	Reason      string          `json:"reason"`
	Error       string          `json:"error"`
	KVReason    string          `json:"kvReason"`
	Version     int64           `json:"version"`
	Value       json.RawMessage `json:"value"`
	FailedIndex *int            `json:"failedIndex"`
	Results     []txnResult     `json:"results"`
}

// txnResult is one element of a committed transaction's flat results:
// push items and acks first, then KV ops, then timer ops.
type txnResult struct {
	Index         int    `json:"index"`
	Type          string `json:"type"`
	Success       bool   `json:"success"`
	TransactionID string `json:"transactionId"`
	MessageID     string `json:"messageId"`

	// kv
	Applied bool            `json:"applied"`
	Op      string          `json:"op"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
	Reason  string          `json:"reason"`

	// timer
	OpIndex   int     `json:"opIndex"`
	OK        bool    `json:"ok"`
	Status    string  `json:"status"`
	Queue     string  `json:"queue"`
	TimerKey  string  `json:"timerKey"`
	Txn       *string `json:"txn"`
	DeliverAt string  `json:"deliverAt"`
}

// first returns the first result of a type.
func (v verdict) first(typ string) (txnResult, bool) {
	for _, r := range v.Results {
		if r.Type == typ {
			return r, true
		}
	}
	return txnResult{}, false
}

// commit posts one transaction under an Idempotency-Key and returns its
// verdict.
func (c *client) commit(ctx context.Context, body any, idemKey string) (verdict, error) {
	var v verdict
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/transaction", body, idemKey)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("transaction: %v: %s", err, b)
	}
	return v, nil
}

// ackAlone acknowledges one message on its own, under its lease. It is a
// transaction holding just the ack, so that it can carry an Idempotency-Key
// and a retry after an unknown outcome is answered from the record.
func (c *client) ackAlone(ctx context.Context, m message, idemKey string) error {
	v, err := c.commit(ctx, map[string]any{"operations": []any{ackOp(m)}}, idemKey)
	if err != nil {
		return err
	}
	if !v.Success {
		return fmt.Errorf("ack of %s refused: %s %s", m.TransactionID, v.Reason, v.Error)
	}
	return nil
}

// kvEntry is one key's state as POST /api/v1/kv get answers it.
type kvEntry struct {
	Found   bool            `json:"found"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
}

// kvGet reads one key.
func (c *client) kvGet(ctx context.Context, ns, key string) (kvEntry, error) {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/kv", map[string]any{
		"operations": []any{map[string]any{"op": "get", "ns": ns, "key": key}},
	}, "")
	if err != nil {
		return kvEntry{}, err
	}
	var out struct {
		Results []kvEntry `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 {
		return kvEntry{}, fmt.Errorf("kv get: want one result: %s", b)
	}
	return out.Results[0], nil
}

// kvDelete removes keys (cleanup).
func (c *client) kvDelete(ctx context.Context, ns string, keys []string) error {
	ops := make([]any, len(keys))
	for i, k := range keys {
		ops[i] = map[string]any{"op": "delete", "ns": ns, "key": k}
	}
	_, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/kv", map[string]any{"operations": ops}, "")
	return err
}

// timerPeek is GET /api/v1/timers/:queue/*timerKey.
type timerPeek struct {
	Found     bool   `json:"found"`
	Txn       string `json:"txn"`
	MessageID string `json:"messageId"`
	DeliverAt string `json:"deliverAt"`
	Partition string `json:"partition"`
	Payload   string `json:"payload"`
}

func timerPath(queue, key string) string {
	// The key is a catch-all path segment and may hold '/'; each of its
	// segments is escaped on its own.
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/api/v1/timers/" + url.PathEscape(queue) + "/" + strings.Join(segs, "/")
}

func (c *client) peekTimer(ctx context.Context, queue, key string) (timerPeek, error) {
	var p timerPeek
	b, err := c.expect(ctx, http.StatusOK, "GET", timerPath(queue, key), nil, "")
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("timer peek: %v: %s", err, b)
	}
	return p, nil
}

// countTimers is GET /api/v1/timers/:queue?mode=count&prefix=.
func (c *client) countTimers(ctx context.Context, queue, prefix string) (int, error) {
	b, err := c.expect(ctx, http.StatusOK, "GET",
		"/api/v1/timers/"+url.PathEscape(queue)+"?mode=count&prefix="+url.QueryEscape(prefix), nil, "")
	if err != nil {
		return 0, err
	}
	var out struct {
		Count *int `json:"count"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Count == nil {
		return 0, fmt.Errorf("timer count: %s", b)
	}
	return *out.Count, nil
}

// cancelTimer is DELETE /api/v1/timers/:queue/*timerKey (cleanup).
func (c *client) cancelTimer(ctx context.Context, queue, key string) error {
	_, err := c.expect(ctx, http.StatusOK, "DELETE", timerPath(queue, key), nil, "")
	return err
}

// queueTotal is the number of messages stored in a queue (GET
// /api/v1/resources/queues/:queue, totals.total); 0 for a queue that does
// not exist.
func (c *client) queueTotal(ctx context.Context, queue string) (int, error) {
	path := "/api/v1/resources/queues/" + url.PathEscape(queue)
	status, b, err := c.do(ctx, "GET", path, nil, "", 15*time.Second)
	if err != nil {
		return 0, err
	}
	if status == http.StatusNotFound {
		return 0, nil
	}
	if status != http.StatusOK {
		return 0, &errStatus{"GET", path, status, string(b)}
	}
	var out struct {
		Totals struct {
			Total int `json:"total"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("queue detail %s: %v: %s", queue, err, b)
	}
	return out.Totals.Total, nil
}

// deleteQueue removes a queue (cleanup).
func (c *client) deleteQueue(ctx context.Context, queue string) error {
	_, err := c.expect(ctx, http.StatusOK, "DELETE", "/api/v1/resources/queues/"+url.PathEscape(queue), nil, "")
	return err
}
