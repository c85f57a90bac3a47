package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// exactly-once (issue 3): the charge-once consumer of the seed. Each order
// is one message; a worker pops it alone, reads the order's marker, and
// settles it in one transaction that acks the message under its lease and
// writes the marker with a required putIfAbsent, so a second settlement of
// the same order could never commit.
const (
	eoWorkers    = 32
	eoPartitions = 64 // the node leases a whole partition per group: 32 workers need more than 32
	eoTTLSeconds = 3600
)

// eoWorker is one consumer connection's counters and buffers.
type eoWorker struct {
	orders, redelivered               int64
	pops, empty, gets, commits        int64
	popRec, getRec, commitRec, ordRec recorder
	buf                               bytes.Buffer
}

func runExactlyOnce(ctx context.Context, o *options) (*result, error) {
	queue := queueName("exactly-once")
	ns := "bench-eo-" + runName() // matches ^[a-z0-9][a-z0-9._-]{0,63}$
	fr := fill(ctx, o, queue, eoPartitions, o.orders, fillBatch, o.prefillTimeout)
	errs := newTally()
	errs.merge(fr.errs)
	if fr.queued == 0 {
		return newResult("exactly-once", o, eoWorkers, 0, 0, 0, errs), errors.New("prefill queued nothing: " + fr.String())
	}
	cl := newClients(o.urls, eoWorkers, o.timeout)
	defer cl.close()
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) +
		"?batch=1&consumerGroup=" + benchGroup + "&subscriptionMode=all"
	var settled atomic.Int64
	ws := make([]eoWorker, eoWorkers)
	elapsed := runFor(ctx, eoWorkers, o.duration, func(w int) bool {
		if settled.Load() >= fr.queued {
			return false // every order settled
		}
		return ws[w].cycle(ctx, cl.pick(w), path, ns, errs, &settled)
	})
	var orders, redelivered, pops, empty, gets, commits int64
	recs := make([][]*recorder, 4)
	for i := range ws {
		w := &ws[i]
		orders, redelivered = orders+w.orders, redelivered+w.redelivered
		pops, empty, gets, commits = pops+w.pops, empty+w.empty, gets+w.gets, commits+w.commits
		for j, r := range []*recorder{&w.ordRec, &w.popRec, &w.getRec, &w.commitRec} {
			recs[j] = append(recs[j], r)
		}
	}
	r := newResult("exactly-once", o, eoWorkers, elapsed, orders, pops+gets+commits, errs)
	for j, op := range []string{"order", "pop", "get", "commit"} {
		r.addLatency(op, summarize(recs[j]))
	}
	remaining := fr.queued - settled.Load()
	r.Extra = map[string]any{
		"queue": queue, "partitions": eoPartitions, "kv_namespace": ns, "marker_ttl_seconds": eoTTLSeconds,
		"prefilled": fr.queued, "prefill_seconds": round(fr.elapsed.Seconds(), 3),
		"orders": orders, "redelivered": redelivered, "pops": pops, "empty_pops": empty,
		"gets": gets, "commits": commits, "remaining": remaining, "urls": cl.used(eoWorkers),
	}
	r.notes = append(r.notes, "prefill "+fr.String(),
		"one order = pop(batch=1) + POST /api/v1/kv get of its marker + POST /api/v1/transaction [ack with leaseId; kv putIfAbsent marker ttlSeconds required]; \"order\" is the wall time of all three",
		fmt.Sprintf("%d orders settled of %d, %d remaining; %d pops (%d empty), %d gets, %d commits", orders, fr.queued, remaining, pops, empty, gets, commits))
	if remaining == 0 && elapsed < o.duration {
		r.notes = append(r.notes, fmt.Sprintf("all orders settled after %.1fs (before -duration); rate is over that time (raise -orders)", elapsed.Seconds()))
	}
	for k := range errs.kinds {
		if k == "kv get HTTP 429" {
			r.notes = append(r.notes, "marker reads were rate-limited: start the node with --kv-read-rate 0 (bench.sh does for this scenario)")
		}
	}
	return r, nil
}

// cycle settles one order, or finds none. It returns false when the run
// should stop. After a failure the message keeps its lease and comes back
// when the lease expires; the failure is counted, the order is not.
func (w *eoWorker) cycle(ctx context.Context, c *client, path, ns string, errs *tally, settled *atomic.Int64) bool {
	start := time.Now()
	status, lat, err := c.do(ctx, http.MethodGet, path, nil, &w.buf)
	if ctx.Err() != nil {
		return false
	}
	w.pops++
	if err != nil {
		errs.add(failed("pop transport", err.Error()))
		return pause(ctx, errPause)
	}
	if status == http.StatusNoContent {
		w.empty++
		return pause(ctx, emptyPause)
	}
	m, v := checkPopOne(status, w.buf.Bytes())
	if v.bad > 0 {
		errs.add(v)
		return pause(ctx, errPause)
	}
	if m == nil {
		w.empty++
		return pause(ctx, emptyPause)
	}
	w.popRec.add(lat)

	key := "order:" + m.TransactionID
	body, _ := json.Marshal(kvBatch{Operations: []kvOp{{Op: "get", NS: ns, Key: key}}})
	status, lat, err = c.do(ctx, http.MethodPost, "/api/v1/kv", body, &w.buf)
	if ctx.Err() != nil {
		return false
	}
	w.gets++
	if err != nil {
		errs.add(failed("kv get transport", err.Error()))
		return pause(ctx, errPause)
	}
	found, v := checkMarkerGet(status, w.buf.Bytes())
	if v.bad > 0 {
		errs.add(v)
		return pause(ctx, errPause)
	}
	w.getRec.add(lat)

	// A marker already set means the order was settled before: the seed
	// acks the message and charges nothing. In a clean run it never
	// happens, so it is counted as a failure too.
	txn := txnBody{Operations: []txnOp{{Type: "ack", TransactionID: m.TransactionID, PartitionID: m.PartitionID,
		ConsumerGroup: benchGroup, LeaseID: m.LeaseID, Status: "completed"}}}
	if !found {
		txn.KV = []kvOp{{Op: "putIfAbsent", NS: ns, Key: key, Value: json.RawMessage(`true`), TTLSeconds: eoTTLSeconds, Required: true}}
	}
	body, _ = json.Marshal(&txn)
	status, lat, err = c.do(ctx, http.MethodPost, "/api/v1/transaction", body, &w.buf)
	if ctx.Err() != nil {
		return false
	}
	w.commits++
	if err != nil {
		errs.add(failed("commit transport", err.Error()))
		return pause(ctx, errPause)
	}
	if v := checkCommit(status, w.buf.Bytes(), len(txn.KV)); v.bad > 0 {
		errs.add(v)
		return pause(ctx, errPause)
	}
	settled.Add(1)
	if found {
		w.redelivered++
		errs.add(failed("redelivered: marker already set", key))
		return true
	}
	w.commitRec.add(lat)
	w.ordRec.add(time.Since(start))
	w.orders++
	return true
}

type popMessage struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	CreatedAt     string `json:"createdAt"`
}

// checkPopOne wants 200, success not false and at most one message with
// the fields an ack needs; nil for an empty answer.
func checkPopOne(status int, body []byte) (*popMessage, verdict) {
	if status != http.StatusOK {
		return nil, failed(fmt.Sprintf("pop HTTP %d", status), snippet(body))
	}
	var pr struct {
		Success  *bool        `json:"success"`
		Messages []popMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &pr); err != nil {
		return nil, failed("pop bad body", err.Error()+": "+snippet(body))
	}
	if pr.Success != nil && !*pr.Success {
		return nil, failed("pop success:false", snippet(body))
	}
	switch len(pr.Messages) {
	case 0:
		return nil, verdict{}
	case 1:
	default:
		return nil, failed("pop batch=1 delivered more", fmt.Sprintf("%d messages", len(pr.Messages)))
	}
	m := &pr.Messages[0]
	if m.TransactionID == "" || m.PartitionID == "" || m.LeaseID == "" {
		return nil, failed("pop message incomplete", snippet(body))
	}
	return m, verdict{good: 1}
}

type kvOp struct {
	Op         string          `json:"op"`
	NS         string          `json:"ns"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value,omitempty"`
	TTLSeconds int             `json:"ttlSeconds,omitempty"`
	Required   bool            `json:"required,omitempty"`
}

type kvBatch struct {
	Operations []kvOp `json:"operations"`
}

type txnOp struct {
	Type          string `json:"type"`
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	ConsumerGroup string `json:"consumerGroup"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
}

type txnBody struct {
	Operations []txnOp `json:"operations"`
	KV         []kvOp  `json:"kv,omitempty"`
}

// checkMarkerGet wants 200 and exactly one get result (spec §4.7) and
// tells whether the marker exists.
func checkMarkerGet(status int, body []byte) (bool, verdict) {
	if status != http.StatusOK {
		return false, failed(fmt.Sprintf("kv get HTTP %d", status), snippet(body))
	}
	var out struct {
		Results []struct {
			Found *bool `json:"found"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return false, failed("kv get bad body", err.Error()+": "+snippet(body))
	}
	if len(out.Results) != 1 || out.Results[0].Found == nil {
		return false, failed("kv get result", snippet(body))
	}
	return *out.Results[0].Found, verdict{good: 1}
}

// checkCommit wants 200, success:true, and a flat result per op (spec
// §4.5): the ack succeeded and each of the kvOps KV writes applied.
func checkCommit(status int, body []byte, kvOps int) verdict {
	if status != http.StatusOK {
		return failed(fmt.Sprintf("commit HTTP %d", status), snippet(body))
	}
	var out struct {
		Success *bool  `json:"success"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
		Results []struct {
			Type    string `json:"type"`
			Success *bool  `json:"success"`
			Applied *bool  `json:"applied"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return failed("commit bad body", err.Error()+": "+snippet(body))
	}
	if out.Success == nil || !*out.Success {
		why := out.Reason
		if why == "" {
			why = out.Error
		}
		return failed("commit rolled back: "+why, snippet(body))
	}
	if len(out.Results) != 1+kvOps {
		return failed("commit result count", fmt.Sprintf("want %d results: %s", 1+kvOps, snippet(body)))
	}
	if a := out.Results[0]; a.Type != "ack" || a.Success == nil || !*a.Success {
		return failed("commit ack result", snippet(body))
	}
	for _, k := range out.Results[1:] {
		if k.Type != "kv" || k.Applied == nil || !*k.Applied {
			return failed("commit kv result", snippet(body))
		}
	}
	return verdict{good: 1}
}
