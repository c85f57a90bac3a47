package queen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/grpc/codes"
)

// httpTransport speaks the Queen HTTP API (spec/http-api.md).
type httpTransport struct {
	base   string // scheme://host[:port], no trailing slash
	hc     *http.Client
	token  TokenSource // nil = no Authorization header
	tenant string      // "" = no x-queen-tenant header
}

func newHTTP(base string, hc *http.Client, token TokenSource, tenant string) *httpTransport {
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		}}
	}
	return &httpTransport{base: strings.TrimRight(base, "/"), hc: hc, token: token, tenant: tenant}
}

func (t *httpTransport) close() error {
	t.hc.CloseIdleConnections()
	return nil
}

// call sends one request and decodes a 2xx JSON answer into out; 204 leaves
// out alone. Anything else is an *Error.
func (t *httpTransport) call(ctx context.Context, method, path string, body, out any) error {
	_, err := t.send(ctx, method, path, "", body, out)
	return err
}

// send is call with an Idempotency-Key ("" = none); it reports whether the
// broker answered from the key's record (Idempotent-Replayed: true).
func (t *httpTransport) send(ctx context.Context, method, path, key string, body, out any) (replayed bool, err error) {
	var rd io.Reader
	if raw, ok := body.(rawJSON); ok {
		rd = bytes.NewReader(raw)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return false, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, rd)
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if t.tenant != "" {
		req.Header.Set("X-Queen-Tenant", t.tenant)
	}
	if t.token != nil {
		tok, err := t.token(ctx)
		if err != nil {
			return false, fmt.Errorf("queen: token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return false, lostOnTheWay(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, lostOnTheWay(ctx, err)
	}
	if resp.StatusCode >= 300 {
		var eb struct{ Error, Reason, Code, Detail string }
		_ = json.Unmarshal(b, &eb)
		msg := eb.Error
		if eb.Detail != "" {
			msg += ": " + eb.Detail
		}
		if msg == "" {
			msg = strings.TrimSpace(string(b))
		}
		reason := eb.Reason
		if reason == "" {
			reason = eb.Code
		}
		return false, httpError(resp.StatusCode, msg, reason)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent && len(b) > 0 {
		if err := decodeAnswer(b, out); err != nil {
			return false, &Error{Status: resp.StatusCode, Code: codes.Internal, Message: "answer does not decode: " + err.Error()}
		}
	}
	return resp.Header.Get("Idempotent-Replayed") == "true", nil
}

// lostOnTheWay is a request that got no answer. While the caller's context
// lives it is UNAVAILABLE (the connection could not be made, or broke before
// the answer: what gRPC reports as UNAVAILABLE too), or DEADLINE_EXCEEDED
// when the http.Client's own timeout ran out; otherwise the context's end.
func lostOnTheWay(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Code: codes.DeadlineExceeded, Message: err.Error()}
	}
	return &Error{Code: codes.Unavailable, Message: err.Error()}
}

// jsonPushItem is a pushed item inside a transaction's operations.
type jsonPushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"`
	TraceID       string          `json:"traceId,omitempty"`
}

func toJSONPush(it pushItem) jsonPushItem {
	return jsonPushItem{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload, TransactionID: it.TransactionID, TraceID: it.TraceID}
}

// decodeAnswer decodes an answer's body into out: a push's answer with
// go-json-experiment, everything else with encoding/json.
func decodeAnswer(b []byte, out any) error {
	if _, ok := out.(*pushAnswer); ok {
		return jsonv2.Unmarshal(b, out)
	}
	return json.Unmarshal(b, out)
}

// rawJSON is a request body already encoded.
type rawJSON []byte

// pushBody encodes a push request. Every payload was checked and compacted
// once, by toPushItem, so it is copied as it is rather than checked again by
// encoding/json (which, for a batch of small messages, cost as much as
// everything else the client does for a push).
func pushBody(items []pushItem) rawJSON {
	n := len(`{"items":[]}`)
	for _, it := range items {
		n += len(`{"queue":"","partition":"","payload":,"transactionId":"","traceId":""},`) +
			len(it.Queue) + len(it.Partition) + len(it.Payload) + len(it.TransactionID) + len(it.TraceID)
	}
	b := make([]byte, 0, n+n/8)
	b = append(b, `{"items":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMember(append(b, '{'), "queue", it.Queue)
		if it.Partition != "" {
			b = appendMember(append(b, ','), "partition", it.Partition)
		}
		b = append(append(b, `,"payload":`...), it.Payload...)
		if it.TransactionID != "" {
			b = appendMember(append(b, ','), "transactionId", it.TransactionID)
		}
		if it.TraceID != "" {
			b = appendMember(append(b, ','), "traceId", it.TraceID)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendMember appends "name":"value", the value quoted as JSON (invalid
// UTF-8 becomes U+FFFD, as encoding/json does).
func appendMember(b []byte, name, value string) []byte {
	b = append(append(append(b, '"'), name...), '"', ':')
	b, _ = jsontext.AppendQuote(b, value)
	return b
}

// pushAnswer is a push's answer: one result per item, in order. It is
// decoded by go-json-experiment (exact member names, as the broker writes
// them), several times faster than encoding/json for a batch.
type pushAnswer []struct {
	Status        string  `json:"status"`
	TransactionID string  `json:"transactionId"`
	MessageID     string  `json:"messageId"`
	PartitionID   string  `json:"partitionId"`
	Error         *string `json:"error"`
}

func (t *httpTransport) push(ctx context.Context, items []pushItem) ([]PushResult, error) {
	var out pushAnswer
	if err := t.call(ctx, http.MethodPost, "/api/v1/push", pushBody(items), &out); err != nil {
		return nil, err
	}
	res := make([]PushResult, len(out))
	for i, r := range out {
		res[i] = PushResult{Status: r.Status, TransactionID: r.TransactionID, MessageID: r.MessageID, PartitionID: r.PartitionID}
		if r.Error != nil {
			res[i].Error = *r.Error
		}
	}
	return res, nil
}

func (t *httpTransport) pop(ctx context.Context, queue string, o PopOptions) ([]*Message, error) {
	path := "/api/v1/pop/queue/" + url.PathEscape(queue)
	if o.Partition != "" {
		path += "/partition/" + url.PathEscape(o.Partition)
	}
	q := url.Values{"batch": {strconv.Itoa(max(o.Batch, 1))}}
	if o.Partitions > 1 {
		q.Set("partitions", strconv.Itoa(o.Partitions))
	}
	if o.Group != "" {
		q.Set("consumerGroup", o.Group)
	}
	if o.Wait > 0 {
		q.Set("wait", "true")
		q.Set("timeout", strconv.FormatInt(o.Wait.Milliseconds(), 10))
	}
	if o.AutoAck {
		q.Set("autoAck", "true")
	}
	if o.Subscription != "" {
		q.Set("subscriptionMode", string(o.Subscription))
	}
	if !o.SubscriptionFrom.IsZero() {
		q.Set("subscriptionFrom", o.SubscriptionFrom.UTC().Format(time.RFC3339Nano))
	}
	if o.LeaseTime > 0 {
		secs, _ := ttlSeconds(o.LeaseTime)
		q.Set("leaseSeconds", strconv.FormatInt(secs, 10))
	}
	var out struct {
		LeaseExpiresAt string
		Messages       []struct {
			ID, TransactionID, Queue, Partition, PartitionID, LeaseID, ConsumerGroup, CreatedAt string
			TraceID                                                                             *string
			Data                                                                                json.RawMessage
			RetryCount                                                                          int
		}
	}
	if err := t.call(ctx, http.MethodGet, path+"?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	expires := parseTime(out.LeaseExpiresAt)
	msgs := make([]*Message, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = &Message{ID: m.ID, TransactionID: m.TransactionID, Data: m.Data, Queue: m.Queue, Partition: m.Partition,
			PartitionID: m.PartitionID, LeaseID: m.LeaseID, ConsumerGroup: m.ConsumerGroup, RetryCount: m.RetryCount,
			CreatedAt: parseTime(m.CreatedAt), LeaseExpiresAt: expires}
		if m.TraceID != nil {
			msgs[i].TraceID = *m.TraceID
		}
		if msgs[i].Queue == "" {
			msgs[i].Queue = queue
		}
	}
	return msgs, nil
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

type jsonAck struct {
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	ConsumerGroup string  `json:"consumerGroup,omitempty"`
	LeaseID       string  `json:"leaseId,omitempty"`
	Status        string  `json:"status"`
	Error         *string `json:"error,omitempty"`
}

func toJSONAck(a ackItem, group string) jsonAck {
	return jsonAck{TransactionID: a.TransactionID, PartitionID: a.PartitionID, ConsumerGroup: group,
		LeaseID: a.LeaseID, Status: string(a.Status), Error: a.Error}
}

type jsonAckResult struct {
	TransactionID string
	Success       bool
	Error         *string
	LeaseReleased bool
	DLQ           bool
}

func fromJSONAcks(in []jsonAckResult) []AckResult {
	out := make([]AckResult, len(in))
	for i, r := range in {
		out[i] = AckResult{TransactionID: r.TransactionID, Success: r.Success, LeaseReleased: r.LeaseReleased, DLQ: r.DLQ}
		if r.Error != nil {
			out[i].Error = *r.Error
		}
	}
	return out
}

func (t *httpTransport) ack(ctx context.Context, group string, item ackItem) ([]AckResult, error) {
	var out []jsonAckResult
	if err := t.call(ctx, http.MethodPost, "/api/v1/ack", toJSONAck(item, group), &out); err != nil {
		return nil, err
	}
	return fromJSONAcks(out), nil
}

func (t *httpTransport) ackBatch(ctx context.Context, group string, items []ackItem) ([]AckResult, error) {
	in := make([]jsonAck, len(items))
	for i, a := range items {
		in[i] = toJSONAck(a, "")
	}
	body := map[string]any{"acknowledgments": in}
	if group != "" {
		body["consumerGroup"] = group
	}
	var out []jsonAckResult
	if err := t.call(ctx, http.MethodPost, "/api/v1/ack/batch", body, &out); err != nil {
		return nil, err
	}
	return fromJSONAcks(out), nil
}

func (t *httpTransport) extend(ctx context.Context, leaseID string, seconds int64) (extendResult, error) {
	var out []struct {
		Success   bool
		Error     *string
		ExpiresAt string
	}
	path := "/api/v1/lease/" + url.PathEscape(leaseID) + "/extend"
	if err := t.call(ctx, http.MethodPost, path, map[string]any{"seconds": seconds}, &out); err != nil {
		return extendResult{}, err
	}
	if len(out) != 1 {
		return extendResult{}, &Error{Status: 200, Code: codes.Internal, Message: "extend answered " + strconv.Itoa(len(out)) + " items"}
	}
	r := extendResult{Success: out[0].Success, ExpiresAt: parseTime(out[0].ExpiresAt)}
	if out[0].Error != nil {
		r.Error = *out[0].Error
	}
	return r, nil
}

func (t *httpTransport) configure(ctx context.Context, queue string, o *queueOptions) error {
	opts := map[string]any{}
	for name, v := range map[string]*int64{
		"leaseTime": o.leaseTime, "retryLimit": o.retryLimit, "retryDelay": o.retryDelayMs, "maxSize": o.maxSize,
		"delayedProcessing": o.delayedProcessing, "windowBuffer": o.windowBuffer, "priority": o.priority, "ttl": o.ttl,
		"retentionSeconds": o.retentionSeconds, "completedRetentionSeconds": o.completedRetentionSeconds,
		"maxWaitTimeSeconds": o.maxWaitTimeSeconds,
	} {
		if v != nil {
			opts[name] = *v
		}
	}
	for name, v := range map[string]*bool{
		"retentionEnabled": o.retentionEnabled, "deadLetterQueue": o.deadLetterQueue, "encryptionEnabled": o.encryptionEnabled,
	} {
		if v != nil {
			opts[name] = *v
		}
	}
	return t.call(ctx, http.MethodPost, "/api/v1/configure", map[string]any{"queue": queue, "options": opts}, nil)
}

func (t *httpTransport) deleteQueue(ctx context.Context, queue string) error {
	return t.call(ctx, http.MethodDelete, "/api/v1/resources/queues/"+url.PathEscape(queue), nil, nil)
}
