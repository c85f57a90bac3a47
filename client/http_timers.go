package queen

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// The HTTP transport's timer routes (addendum §1.2, §2) and queue detail.

type jsonTimerOp struct {
	Op        string   `json:"op"`
	Queue     string   `json:"queue"`
	TimerKey  string   `json:"timerKey"`
	Partition string   `json:"partition,omitempty"`
	DelayMs   *float64 `json:"delayMs,omitempty"`
	Txn       string   `json:"txn,omitempty"`
	Payload   *string  `json:"payload,omitempty"` // base64 of the body's bytes
}

func toJSONTimer(op timerOp) jsonTimerOp {
	j := jsonTimerOp{Op: op.Op, Queue: op.Queue, TimerKey: op.Key, Partition: op.Partition, Txn: op.Txn}
	if op.Op != "cancel" {
		b64 := base64.StdEncoding.EncodeToString(op.Payload)
		j.DelayMs, j.Payload = &op.DelayMs, &b64
	}
	return j
}

func toJSONTimers(ops []timerOp) []jsonTimerOp {
	out := make([]jsonTimerOp, len(ops))
	for i, op := range ops {
		out[i] = toJSONTimer(op)
	}
	return out
}

// jsonTimerResult is a timer op's result; null txn and messageId decode as "".
type jsonTimerResult struct {
	OK                                      bool `json:"ok"`
	Status, Queue, TimerKey, Txn, MessageID string
	DeliverAt                               string
}

func (r jsonTimerResult) neutral() TimerResult {
	return TimerResult{OK: r.OK, Status: TimerStatus(r.Status), Queue: r.Queue, Key: r.TimerKey, TransactionID: r.Txn,
		MessageID: r.MessageID, DeliverAt: parseTime(r.DeliverAt)}
}

// timerPath is the route of one timer. The key is a catch-all and may hold
// '/': each of its segments is escaped on its own.
func timerPath(queue, key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/api/v1/timers/" + url.PathEscape(queue) + "/" + strings.Join(segs, "/")
}

func (t *httpTransport) timers(ctx context.Context, ops []timerOp) ([]TimerResult, error) {
	var out struct{ Results []jsonTimerResult }
	if err := t.call(ctx, http.MethodPost, "/api/v1/timers", map[string]any{"operations": toJSONTimers(ops)}, &out); err != nil {
		return nil, err
	}
	res := make([]TimerResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = r.neutral()
	}
	return res, nil
}

func (t *httpTransport) cancelTimer(ctx context.Context, queue, key, txn string) (*TimerResult, error) {
	path := timerPath(queue, key)
	if txn != "" {
		path += "?" + url.Values{"txn": {txn}}.Encode()
	}
	var out jsonTimerResult
	if err := t.call(ctx, http.MethodDelete, path, nil, &out); err != nil {
		return nil, err
	}
	r := out.neutral()
	return &r, nil
}

type jsonTimer struct {
	Found                                      bool
	Queue, TimerKey, Partition, DeliverAt, Txn string
	MessageID, Payload, ProducerSub, LastError string
	CreatedAt, UpdatedAt                       string
	Encrypted                                  bool
	Attempts                                   int
}

func (j jsonTimer) neutral() (Timer, error) {
	t := Timer{Found: j.Found, Queue: j.Queue, Key: j.TimerKey, Partition: j.Partition, DeliverAt: parseTime(j.DeliverAt),
		TransactionID: j.Txn, MessageID: j.MessageID, Encrypted: j.Encrypted, ProducerSub: j.ProducerSub,
		Attempts: j.Attempts, LastError: j.LastError, CreatedAt: parseTime(j.CreatedAt), UpdatedAt: parseTime(j.UpdatedAt)}
	if j.Payload != "" {
		b, err := base64.StdEncoding.DecodeString(j.Payload)
		if err != nil {
			return t, &Error{Status: http.StatusOK, Code: codes.Internal, Message: "timer payload is not base64: " + err.Error()}
		}
		t.Data = b
	}
	return t, nil
}

func (t *httpTransport) getTimer(ctx context.Context, queue, key string) (*Timer, error) {
	var out jsonTimer
	if err := t.call(ctx, http.MethodGet, timerPath(queue, key), nil, &out); err != nil {
		return nil, err
	}
	tm, err := out.neutral()
	if err != nil {
		return nil, err
	}
	if !tm.Found {
		return &Timer{Queue: queue, Key: key}, nil
	}
	return &tm, nil
}

func (t *httpTransport) listTimers(ctx context.Context, queue, after string, limit int) (*TimerPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/api/v1/timers/" + url.PathEscape(queue)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Rows      []jsonTimer
		Truncated bool
		NextAfter string
	}
	if err := t.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	page := &TimerPage{Truncated: out.Truncated, NextAfter: out.NextAfter}
	for _, row := range out.Rows {
		row.Found = true
		tm, err := row.neutral()
		if err != nil {
			return nil, err
		}
		page.Timers = append(page.Timers, tm)
	}
	return page, nil
}

func (t *httpTransport) countTimers(ctx context.Context, queue, prefix string) (int, error) {
	var out struct{ Count int }
	path := "/api/v1/timers/" + url.PathEscape(queue) + "?" + url.Values{"mode": {"count"}, "prefix": {prefix}}.Encode()
	if err := t.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return 0, err
	}
	return out.Count, nil
}

func (t *httpTransport) queueStats(ctx context.Context, queue string) (*QueueStats, error) {
	var out struct{ Totals QueueStats }
	if err := t.call(ctx, http.MethodGet, "/api/v1/resources/queues/"+url.PathEscape(queue), nil, &out); err != nil {
		return nil, err
	}
	return &out.Totals, nil
}
