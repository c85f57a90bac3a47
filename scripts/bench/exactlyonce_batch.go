package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// exactly-once-batch (issue 22): the seed's charge loop in batches, through
// the Go client's OnceConsumer: each of 32 workers pops up to eoBatch
// orders, reads their markers with one getMany, and settles them in one
// transaction that acks every order under its lease with a required
// putIfAbsent of its marker. Three requests and two entries per batch
// instead of per order; every order is still settled at most once.
const eoBatch = 10

// steps times each request of the consumers by its step (pop, get,
// commit), so that the consumer's own requests are measured.
type steps struct {
	mu   sync.Mutex
	recs map[string]*recorder
}

// timed is one worker's http.RoundTripper into the shared steps.
type timed struct {
	s    *steps
	next http.RoundTripper
}

func (t timed) RoundTrip(req *http.Request) (*http.Response, error) {
	step := "commit"
	switch {
	case strings.Contains(req.URL.Path, "/pop/"):
		step = "pop"
	case strings.HasSuffix(req.URL.Path, "/kv"):
		step = "get"
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		lat := time.Since(start)
		t.s.mu.Lock()
		t.s.recs[step].add(lat)
		t.s.mu.Unlock()
	}
	return resp, err
}

func runExactlyOnceBatch(ctx context.Context, o *options) (*result, error) {
	queue := queueName("exactly-once-batch")
	ns := "bench-eob-" + runName()
	fr := fill(ctx, o, queue, eoPartitions, o.orders, fillBatch, o.prefillTimeout)
	errs := newTally()
	errs.merge(fr.errs)
	if fr.queued == 0 {
		return newResult("exactly-once-batch", o, eoWorkers, 0, 0, 0, errs), errors.New("prefill queued nothing: " + fr.String())
	}
	timer := &steps{recs: map[string]*recorder{"pop": {}, "get": {}, "commit": {}}}
	var (
		mu                 sync.Mutex
		batchRecs          []*recorder
		orders, redelivers atomic.Int64
		settledAll         = make(chan struct{})
		closeOnce          sync.Once
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var consumers []*queen.OnceConsumer
	for w := range eoWorkers {
		base := newClient(o.urls[w%len(o.urls)], 2, o.timeout)
		defer base.close()
		hc := &http.Client{Transport: timed{s: timer, next: base.tr}, Timeout: o.timeout}
		c, err := queen.New(base.base, queen.WithHTTPClient(hc), queen.WithRetry(queen.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		rec := &recorder{}
		batchRecs = append(batchRecs, rec)
		last, lastLease := time.Now(), ""
		cons := c.Queue(queue).OnceConsumer(queen.OnceOptions{
			ConsumerOptions: queen.ConsumerOptions{Group: benchGroup, Subscription: queen.SubscribeAll, Batch: eoBatch,
				Wait: time.Second, RenewEvery: -1, OnError: func(err error) { errs.add(failed("consumer", err.Error())) }},
			Namespace: ns, TTL: eoTTLSeconds * time.Second,
			Key: func(m *queen.Message) string { return "order:" + m.TransactionID },
			OnSettled: func(m *queen.Message, s queen.OnceSettled) {
				if m.LeaseID != lastLease { // a new batch: its cycle since the last one's end
					now := time.Now()
					mu.Lock()
					rec.add(now.Sub(last))
					mu.Unlock()
					last, lastLease = now, m.LeaseID
				}
				switch {
				case s.Outcome == queen.OnceCommitted && s.Acked:
					if orders.Add(1) >= fr.queued {
						closeOnce.Do(func() { close(settledAll) })
					}
				case s.Outcome == queen.OnceMarked:
					redelivers.Add(1)
					errs.add(failed("redelivered: marker already set", m.TransactionID))
				case s.Outcome == queen.OnceUncommitted || s.Outcome == queen.OnceFailed:
					errs.add(failed("batch "+s.Outcome.String(), fmt.Sprint(s.Err)))
				}
			},
		})
		consumers = append(consumers, cons)
		wg.Go(func() {
			if err := cons.Run(runCtx, func(context.Context, *queen.Message, *queen.Effect) error { return nil }); err != nil && runCtx.Err() == nil {
				errs.add(failed("consumer run", err.Error()))
			}
		})
	}
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
	case <-settledAll:
	}
	elapsed := time.Since(start)
	n := orders.Load() // the rate counts what settled within the run
	for _, c := range consumers {
		c.Stop() // in-flight batches finish and settle
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(o.timeout):
		cancel()
		<-stopped
	}
	reqs := int64(len(timer.recs["pop"].lat) + len(timer.recs["get"].lat) + len(timer.recs["commit"].lat))
	r := newResult("exactly-once-batch", o, eoWorkers, elapsed, n, reqs, errs)
	r.addLatency("batch", summarize(batchRecs))
	for _, op := range []string{"pop", "get", "commit"} {
		r.addLatency(op, summarize([]*recorder{timer.recs[op]}))
	}
	r.Extra = map[string]any{"queue": queue, "partitions": eoPartitions, "kv_namespace": ns, "batch": eoBatch,
		"prefilled": fr.queued, "orders": n, "redelivered": redelivers.Load()}
	r.notes = append(r.notes, "prefill "+fr.String(),
		fmt.Sprintf("one batch = pop(batch=%d) + POST /api/v1/kv getMany of their markers + POST /api/v1/transaction [%d acks with leaseId; a required putIfAbsent marker each], through the Go client's OnceConsumer; \"batch\" is a worker's cycle", eoBatch, eoBatch),
		fmt.Sprintf("%d orders settled of %d", n, fr.queued))
	return r, nil
}
