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

const (
	popAckPartitions = 32 // the node leases a whole partition per group, so consumers need many
	popBatch         = 100
	fillBatch        = 1000
	benchGroup       = "bench"
	emptyPause       = time.Millisecond // after a 204, so idle consumers do not spin
)

type popResponse struct {
	Success  *bool `json:"success"`
	Messages []struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
	} `json:"messages"`
}

type ackItem struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
}

type ackBatch struct {
	ConsumerGroup   string    `json:"consumerGroup"`
	Acknowledgments []ackItem `json:"acknowledgments"`
}

// consumer is one consumer connection's counters and buffers.
type consumer struct {
	pops, empty, acks, acked int64
	popRec, ackRec           recorder
	buf                      bytes.Buffer
	batch                    ackBatch
}

// runPopAck prefills a fresh queue, then has o.conns consumers of one group
// pop and batch-ack until the backlog is gone or o.duration has passed.
func runPopAck(ctx context.Context, o *options) (*result, error) {
	queue := queueName("pop-ack")
	fr := fill(ctx, o, queue, popAckPartitions, o.prefill, fillBatch, o.prefillTimeout)
	errs := newTally()
	errs.merge(fr.errs)
	if fr.queued == 0 {
		return newResult("pop-ack", o, o.conns, 0, 0, 0, errs), errors.New("prefill queued nothing: " + fr.String())
	}
	cl := newClients(o.urls, o.conns, o.timeout)
	defer cl.close()
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) +
		fmt.Sprintf("?batch=%d&consumerGroup=%s&subscriptionMode=all", popBatch, benchGroup)
	var acked atomic.Int64
	cs := make([]consumer, o.conns)
	elapsed := runFor(ctx, o.conns, o.duration, func(w int) bool {
		if acked.Load() >= fr.queued {
			return false // drained
		}
		return cs[w].cycle(ctx, cl.pick(w), path, errs, &acked)
	})
	var pops, empty, acks, total int64
	popRecs, ackRecs := make([]*recorder, len(cs)), make([]*recorder, len(cs))
	for i := range cs {
		pops, empty, acks, total = pops+cs[i].pops, empty+cs[i].empty, acks+cs[i].acks, total+cs[i].acked
		popRecs[i], ackRecs[i] = &cs[i].popRec, &cs[i].ackRec
	}
	r := newResult("pop-ack", o, o.conns, elapsed, total, pops+acks, errs)
	r.addLatency("pop", summarize(popRecs))
	r.addLatency("ack", summarize(ackRecs))
	remaining := fr.queued - total
	r.Extra = map[string]any{
		"queue": queue, "partitions": popAckPartitions, "batch": popBatch,
		"prefilled": fr.queued, "prefill_seconds": round(fr.elapsed.Seconds(), 3),
		"pops": pops, "empty_pops": empty, "acks": acks, "remaining": remaining,
		"urls": cl.used(o.conns),
	}
	r.notes = append(r.notes, "prefill "+fr.String(),
		fmt.Sprintf("%d pops (%d empty), %d ack requests, %d of %d acked, %d remaining", pops, empty, acks, total, fr.queued, remaining))
	if remaining == 0 && elapsed < o.duration {
		r.notes = append(r.notes, fmt.Sprintf("backlog drained after %.1fs (before -duration); rate is over that time", elapsed.Seconds()))
	}
	return r, nil
}

// cycle is one pop and, when it delivered, one ack/batch of everything it
// delivered. It returns false when the run should stop.
func (cs *consumer) cycle(ctx context.Context, c *client, path string, errs *tally, acked *atomic.Int64) bool {
	status, lat, err := c.do(ctx, http.MethodGet, path, nil, &cs.buf)
	if ctx.Err() != nil {
		return false
	}
	cs.pops++
	if err != nil {
		errs.add(failed("pop transport", err.Error()))
		return pause(ctx, errPause)
	}
	if status == http.StatusNoContent {
		cs.empty++
		return pause(ctx, emptyPause)
	}
	if status != http.StatusOK {
		errs.add(failed(fmt.Sprintf("pop HTTP %d", status), snippet(cs.buf.Bytes())))
		return pause(ctx, errPause)
	}
	var pr popResponse
	if err := json.Unmarshal(cs.buf.Bytes(), &pr); err != nil {
		errs.add(failed("pop bad body", err.Error()+": "+snippet(cs.buf.Bytes())))
		return pause(ctx, errPause)
	}
	if pr.Success != nil && !*pr.Success {
		errs.add(failed("pop success:false", snippet(cs.buf.Bytes())))
		return pause(ctx, errPause)
	}
	if len(pr.Messages) == 0 {
		cs.empty++
		return pause(ctx, emptyPause)
	}
	cs.popRec.add(lat)
	cs.batch.ConsumerGroup = benchGroup
	items := cs.batch.Acknowledgments[:0]
	for _, m := range pr.Messages {
		if m.TransactionID == "" || m.PartitionID == "" || m.LeaseID == "" {
			errs.add(failed("pop message incomplete", fmt.Sprintf("%+v", m)))
			continue // still ack the rest, so the lease can be released
		}
		items = append(items, ackItem{m.TransactionID, m.PartitionID, m.LeaseID, "completed"})
	}
	cs.batch.Acknowledgments = items
	body, err := json.Marshal(&cs.batch)
	if err != nil {
		errs.add(failed("ack marshal", err.Error()))
		return false
	}
	status, lat, err = c.do(ctx, http.MethodPost, "/api/v1/ack/batch", body, &cs.buf)
	if ctx.Err() != nil {
		return false
	}
	cs.acks++
	if err != nil {
		errs.add(failed("ack transport", err.Error()))
		return pause(ctx, errPause)
	}
	v := checkAck(status, cs.buf.Bytes(), len(items))
	cs.acked += int64(v.good)
	acked.Add(int64(v.good))
	if v.bad > 0 {
		errs.add(v)
		return pause(ctx, errPause)
	}
	cs.ackRec.add(lat)
	return true
}

var (
	successTok = []byte(`"success":`)
	ackOKTok   = []byte(`"success":true`)
)

// checkAck wants 200 and success:true for each of n items (spec §4.4). The
// fast path counts success fields; anything unexpected is decoded in full.
func checkAck(status int, body []byte, n int) verdict {
	if status != http.StatusOK {
		return failed(fmt.Sprintf("ack HTTP %d", status), snippet(body))
	}
	if bytes.Count(body, ackOKTok) == n && bytes.Count(body, successTok) == n {
		return verdict{good: n}
	}
	var items []struct {
		Success bool    `json:"success"`
		Error   *string `json:"error"`
	}
	if err := json.Unmarshal(body, &items); err != nil {
		return failed("ack bad body", err.Error()+": "+snippet(body))
	}
	if len(items) != n {
		return failed("ack item count", fmt.Sprintf("sent %d acks, got %d verdicts", n, len(items)))
	}
	var v verdict
	for i, it := range items {
		if it.Success {
			v.good++
			continue
		}
		e := "<null>"
		if it.Error != nil {
			e = *it.Error
		}
		v.bad++
		v.kind = "ack item failed: " + e
		v.detail = fmt.Sprintf("item %d: %s", i, snippet(body))
	}
	return v
}
