package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	queueName = "soak"
	group     = "charge"
	markerNS  = "soak-charged"
)

// workload is the soak's producers and consumers and what they counted.
type workload struct {
	o       *options
	urls    []string
	hc      *http.Client
	payload json.RawMessage

	pushed, consumed, charged, redelivered atomic.Int64
	retried                                atomic.Int64 // 5xx or transport errors, retried (a killed node's connections)
	errors                                 atomic.Int64 // requests given up: refused or unreadable
	lastErr, lastRefusal                   atomic.Value

	seenMu sync.Mutex
	seen   []uint64 // bit n: order-n was delivered
}

// deliver notes the orders of a pop.
func (w *workload) deliver(ms []message) {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	for _, m := range ms {
		var n int64
		if _, err := fmt.Sscanf(m.TransactionID, "order-%d", &n); err != nil || n < 0 {
			continue
		}
		for int64(len(w.seen))*64 <= n {
			w.seen = append(w.seen, 0)
		}
		w.seen[n/64] |= 1 << (n % 64)
	}
}

// missing counts the orders below n never delivered.
func (w *workload) missing(n int64) int64 {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	var lost int64
	for i := int64(0); i < n; i++ {
		if i/64 >= int64(len(w.seen)) || w.seen[i/64]&(1<<(i%64)) == 0 {
			lost++
		}
	}
	return lost
}

func newWorkload(o *options, urls []string) *workload {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	pad := strings.Repeat("x", max(o.payload-40, 0))
	return &workload{o: o, urls: urls, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		payload: json.RawMessage(fmt.Sprintf(`{"amount":100,"pad":%q}`, pad))}
}

// retry counts an attempt that will be repeated.
func (w *workload) retry(err error) {
	w.retried.Add(1)
	w.lastErr.Store(err.Error())
	time.Sleep(200 * time.Millisecond)
}

// fail counts a request given up.
func (w *workload) fail(err error) {
	w.errors.Add(1)
	w.lastErr.Store(err.Error())
	time.Sleep(200 * time.Millisecond)
}

// call sends one request; a 5xx or a transport error is retried (every
// request of the soak is safe to repeat: pushes carry their ids, acks and
// the marker transaction are idempotent) until ctx ends.
func (w *workload) call(ctx context.Context, node int, method, path string, body any, want int, out any) bool {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		url := w.urls[(node+attempt)%len(w.urls)] + path
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		resp, err := w.hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				w.retry(err)
			}
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			w.retry(fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b))
			continue
		}
		if resp.StatusCode != want && !(want == 200 && resp.StatusCode == 204) {
			w.fail(fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b))
			return false
		}
		if out != nil && resp.StatusCode == want && len(b) > 0 {
			if err := json.Unmarshal(b, out); err != nil {
				w.fail(fmt.Errorf("%s %s: %v", method, path, err))
				return false
			}
		}
		return true
	}
	return false
}

func (w *workload) configure(ctx context.Context) error {
	body := map[string]any{"queue": queueName, "options": map[string]any{
		"retentionEnabled": w.o.completedRetention > 0, "completedRetentionSeconds": w.o.completedRetention, "leaseTime": 30}}
	if !w.call(ctx, 0, "POST", "/api/v1/configure", body, 200, nil) {
		return fmt.Errorf("configure failed: %v", w.lastErr.Load())
	}
	return nil
}

type pushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
}

func (w *workload) produce(ctx context.Context, p int) {
	items := make([]pushItem, w.o.batch)
	for n := 0; ctx.Err() == nil; n++ {
		for w.pushed.Load()-w.consumed.Load() > w.o.backlog && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		base := w.pushed.Add(int64(w.o.batch)) - int64(w.o.batch)
		if base >= w.o.messages {
			w.pushed.Add(-int64(w.o.batch))
			return
		}
		part := fmt.Sprint("p", (p+n*w.o.producers)%w.o.partitions)
		for i := range items {
			items[i] = pushItem{Queue: queueName, Partition: part, TransactionID: fmt.Sprint("order-", base+int64(i)), Payload: w.payload}
		}
		if !w.call(ctx, p, "POST", "/api/v1/push", map[string]any{"items": items}, 201, nil) {
			w.pushed.Add(-int64(w.o.batch))
		}
	}
}

type message struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
}

type ack struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
}

// charge settles one order the seed's way: the ack under the lease and
// the order's marker in one transaction; a marker already there means the
// order was charged before (a redelivery) and the transaction is refused.
func (w *workload) charge(ctx context.Context, c int, m message) {
	txn := map[string]any{
		"operations": []map[string]any{{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"consumerGroup": group, "leaseId": m.LeaseID, "status": "completed"}},
		"kv": []map[string]any{{"op": "putIfAbsent", "ns": markerNS, "key": m.TransactionID, "value": true,
			"ttlSeconds": 60, "required": true}},
	}
	var res struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	if !w.call(ctx, c, "POST", "/api/v1/transaction", txn, 200, &res) {
		return
	}
	if res.Success {
		w.charged.Add(1)
		return
	}
	w.redelivered.Add(1)
	w.lastRefusal.Store(res.Error)
}

// consume pops, settles one order in ten through the marker + ack
// transaction and acks the rest in one batch.
func (w *workload) consume(ctx context.Context, c int) {
	path := "/api/v1/pop/queue/" + queueName + "?batch=100&wait=true&timeout=1000&subscriptionMode=all&consumerGroup=" + group
	for ctx.Err() == nil {
		var pop struct {
			Messages []message `json:"messages"`
		}
		if !w.call(ctx, c, "GET", path, nil, 200, &pop) || len(pop.Messages) == 0 {
			continue
		}
		w.deliver(pop.Messages)
		var batch []ack
		var wg sync.WaitGroup
		for _, m := range pop.Messages {
			if !strings.HasSuffix(m.TransactionID, "0") {
				batch = append(batch, ack{m.TransactionID, m.PartitionID, m.LeaseID, "completed"})
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); w.charge(ctx, c, m) }()
		}
		wg.Wait()
		if len(batch) > 0 {
			w.call(ctx, c, "POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": batch, "consumerGroup": group}, 200, nil)
		}
		w.consumed.Add(int64(len(pop.Messages)))
	}
}
