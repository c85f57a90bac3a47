package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client speaks the few routes of the Queen HTTP API the lab needs
// (spec §4.1 configure, §4.2 push, §4.3 pop, §4.4 ack, §4.5 transaction,
// §4.7 KV, §4.8 queue detail). Every call is bounded by its context.
type client struct {
	base string
	hc   *http.Client
	// popWait is the long-poll limit of one pop, in milliseconds.
	popWait int
	retries *counter // 503 / 429 / transport errors that were retried
}

// errStatus is an answer the lab did not expect.
type errStatus struct {
	method, path string
	status       int
	body         string
}

func (e *errStatus) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s", e.method, e.path, e.status, strings.TrimSpace(e.body))
}

// retryable reports whether an answer is worth another try: the node is
// electing a leader or not sure of a write (503), the KV read rate is spent
// (429), or an internal error (500). Every request the lab sends is safe to
// repeat (spec §1.2): pushes carry a transactionId, acks and commits carry a
// lease, and a commit that landed twice is refused by its own gates.
func retryable(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests ||
		status == http.StatusInternalServerError
}

// do sends one request and retries 5xx, 429 and transport errors with an
// exponential backoff (25 ms doubling to 1 s) until ctx ends. It returns the
// final status and body. body is marshalled as JSON unless nil.
func (c *client) do(ctx context.Context, method, path string, body any, timeout time.Duration) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	backoff := 25 * time.Millisecond
	for {
		status, b, err := c.once(ctx, method, path, raw, timeout)
		if err == nil && !retryable(status) {
			return status, b, nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = &errStatus{method, path, status, string(b)}
			}
			return 0, nil, fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		}
		c.retries.add(1)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// once sends one request without retrying.
func (c *client) once(ctx context.Context, method, path string, raw []byte, timeout time.Duration) (int, []byte, error) {
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

// sendAndDropReply sends a request and throws the answer away unread: the
// worker dies between sending the commit and reading its verdict. The
// broker has answered (so the commit, when it could land, has landed), but
// the worker never learns what it said.
func (c *client) sendAndDropReply(ctx context.Context, method, path string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil // lost on the way; from the worker's side it is the same crash
	}
	resp.Body.Close() // the verdict is in the body, and nobody reads it
	return nil
}

// expect requires one status.
func (c *client) expect(ctx context.Context, want int, method, path string, body any) ([]byte, error) {
	status, b, err := c.do(ctx, method, path, body, 15*time.Second)
	if err != nil {
		return nil, err
	}
	if status != want {
		return nil, &errStatus{method, path, status, string(b)}
	}
	return b, nil
}

// configure creates the queue with a short lease (POST /api/v1/configure).
func (c *client) configure(ctx context.Context, queue string, leaseSeconds, retryLimit int) error {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/configure", map[string]any{
		"queue":   queue,
		"options": map[string]any{"leaseTime": leaseSeconds, "retryLimit": retryLimit, "retryDelay": 100},
	})
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

// push posts items and requires every one to come back queued (or
// duplicate, when a retried request had already landed).
func (c *client) push(ctx context.Context, items []pushItem) error {
	b, err := c.expect(ctx, http.StatusCreated, "POST", "/api/v1/push", map[string]any{"items": items})
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
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	Data          json.RawMessage `json:"data"`
}

// pop long-polls one batch for group. It returns nil, nil for an empty pop
// (204).
func (c *client) pop(ctx context.Context, queue, group string, batch int) ([]message, error) {
	q := url.Values{}
	q.Set("consumerGroup", group)
	q.Set("subscriptionMode", "all")
	q.Set("batch", strconv.Itoa(batch))
	q.Set("wait", "true")
	q.Set("timeout", strconv.Itoa(c.popWait))
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "?" + q.Encode()
	status, b, err := c.do(ctx, "GET", path, nil, time.Duration(c.popWait)*time.Millisecond+10*time.Second)
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

// ackBody is one ack (POST /api/v1/ack, or an ack op of a transaction).
func ackBody(m message, group string) map[string]any {
	return map[string]any{
		"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"consumerGroup": group, "leaseId": m.LeaseID, "status": "completed",
	}
}

// ack acknowledges one message under its lease. It reports whether the
// broker took it; a refusal ("Invalid or expired lease") is not an error.
func (c *client) ack(ctx context.Context, m message, group string) (bool, string, error) {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/ack", ackBody(m, group))
	if err != nil {
		return false, "", err
	}
	var out []struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 1 {
		return false, "", fmt.Errorf("ack: want an array of one item: %s", b)
	}
	if out[0].Error != nil {
		return out[0].Success, *out[0].Error, nil
	}
	return out[0].Success, "", nil
}

// ackAll acknowledges a batch in one POST /api/v1/ack/batch.
func (c *client) ackAll(ctx context.Context, msgs []message, group string) error {
	acks := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		acks[i] = ackBody(m, group)
		delete(acks[i], "consumerGroup")
	}
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/ack/batch",
		map[string]any{"consumerGroup": group, "acknowledgments": acks})
	if err != nil {
		return err
	}
	var out []struct {
		Success bool `json:"success"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out) != len(msgs) {
		return fmt.Errorf("ack/batch of %d: %s", len(msgs), b)
	}
	for i, r := range out {
		if !r.Success {
			return fmt.Errorf("ack/batch: item %d refused: %s", i, b)
		}
	}
	return nil
}

// verdict is the answer to POST /api/v1/transaction.
type verdict struct {
	Success  bool            `json:"success"`
	Reason   string          `json:"reason"`
	Error    string          `json:"error"`
	KVReason string          `json:"kvReason"`
	Value    json.RawMessage `json:"value"`
}

// commit posts one transaction and returns its verdict. Every verdict is
// HTTP 200; the outcome is in the body (spec §4.5).
func (c *client) commit(ctx context.Context, body any) (verdict, error) {
	var v verdict
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/transaction", body)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("transaction: %v: %s", err, b)
	}
	return v, nil
}

// kvGet reads one key through POST /api/v1/kv (the batch route keeps the
// key out of URLs and access logs, as the seed does).
func (c *client) kvGet(ctx context.Context, ns, key string) (bool, json.RawMessage, error) {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/kv", map[string]any{
		"operations": []any{map[string]any{"op": "get", "ns": ns, "key": key}},
	})
	if err != nil {
		return false, nil, err
	}
	var out struct {
		Results []struct {
			Found bool            `json:"found"`
			Value json.RawMessage `json:"value"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 {
		return false, nil, fmt.Errorf("kv get: want one result: %s", b)
	}
	return out.Results[0].Found, out.Results[0].Value, nil
}

// kvRow is one row of a getMany.
type kvRow struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// kvGetMany reads many keys in one op.
func (c *client) kvGetMany(ctx context.Context, ns string, keys []string) ([]kvRow, []string, error) {
	b, err := c.expect(ctx, http.StatusOK, "POST", "/api/v1/kv", map[string]any{
		"operations": []any{map[string]any{"op": "getMany", "ns": ns, "keys": keys}},
	})
	if err != nil {
		return nil, nil, err
	}
	var out struct {
		Results []struct {
			Rows      []kvRow  `json:"rows"`
			Missing   []string `json:"missing"`
			Truncated bool     `json:"truncated"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != 1 {
		return nil, nil, fmt.Errorf("kv getMany: want one result: %s", b)
	}
	r := out.Results[0]
	if r.Truncated {
		return nil, nil, errors.New("kv getMany: truncated answer")
	}
	return r.Rows, r.Missing, nil
}

// queueTotal is the number of messages stored in a queue (GET
// /api/v1/resources/queues/:queue, totals.total).
func (c *client) queueTotal(ctx context.Context, queue string) (int, error) {
	b, err := c.expect(ctx, http.StatusOK, "GET", "/api/v1/resources/queues/"+url.PathEscape(queue), nil)
	if err != nil {
		return 0, err
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

// pacer spaces calls at least 1/rate apart (a token bucket of one). The
// lab takes a token BEFORE it pops, so waiting for the broker's KV read
// rate never eats into a lease.
type pacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
}

func newPacer(perSecond float64) *pacer {
	if perSecond <= 0 {
		return &pacer{}
	}
	return &pacer{every: time.Duration(float64(time.Second) / perSecond)}
}

func (p *pacer) wait(ctx context.Context) error {
	if p.every == 0 {
		return ctx.Err()
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	if d := time.Until(at); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return ctx.Err()
}

// counter is a mutex-guarded int.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add(d int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.n += d
	c.mu.Unlock()
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
