package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// runReads answers: what does one linearizable read cost through the
// leader, and what through a follower? One client, one KV get of the same
// key at a time (GET /api/v1/kv/:ns/:key, the seed's marker read),
// alternating between the leader and a follower so both see the same
// conditions: for half of -duration with nothing else running, then for
// half while 4 producers push single messages through every node (writes
// keep committing, as in the seed's pattern).
func runReads(ctx context.Context, o *options) (*result, error) {
	leader, followers, err := roles(ctx, o.urls)
	if err != nil {
		return nil, err
	}
	ns := "bench-read-" + runID
	path := "/api/v1/kv/" + ns + "/marker"
	c := newClient(leader, 1, o.timeout)
	defer c.close()
	var buf bytes.Buffer
	status, _, err := c.do(ctx, http.MethodPut, path, []byte(`{"value":{"charged":true},"forever":true}`), &buf)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("put the key: %d %v %s", status, err, snippet(buf.Bytes()))
	}
	errs := newTally()
	targets := []struct {
		op string
		c  *client
	}{{"leader", newClient(leader, 1, o.timeout)}}
	if len(followers) > 0 {
		targets = append(targets, struct {
			op string
			c  *client
		}{"follower", newClient(followers[0], 1, o.timeout)})
	}
	r := newResult("reads", o, 1, 0, 0, 0, errs)
	var total time.Duration
	for _, loaded := range []bool{false, true} {
		suffix := ""
		stopLoad := func() {}
		if loaded {
			suffix = "/loaded"
			stopLoad = backgroundPushes(ctx, o, 4, errs)
		}
		recs := make([]recorder, len(targets))
		turn := 0
		total += runFor(ctx, 1, o.duration/2, func(int) bool {
			t := targets[turn%len(targets)]
			i := turn % len(targets)
			turn++
			status, lat, err := t.c.do(ctx, http.MethodGet, path, nil, &buf)
			if ctx.Err() != nil {
				return false
			}
			r.Requests++
			if err != nil || status != http.StatusOK || !bytes.Contains(buf.Bytes(), []byte(`"charged":true`)) {
				errs.add(failed(fmt.Sprintf("get via %s: %d", t.op, status), fmt.Sprint(err, " ", snippet(buf.Bytes()))))
				return pause(ctx, errPause)
			}
			r.Messages++
			recs[i].add(lat)
			return true
		})
		stopLoad()
		for i, t := range targets {
			r.addLatency(t.op+suffix, summarize([]*recorder{&recs[i]}))
		}
		if len(targets) > 1 {
			l, f := r.Latency["leader"+suffix], r.Latency["follower"+suffix]
			r.notes = append(r.notes, fmt.Sprintf("linearizable KV get%s: leader p50 %.3f ms p99 %.3f ms; follower p50 %.3f ms p99 %.3f ms (%.2fx)",
				map[bool]string{false: " idle", true: " under load"}[loaded], l.P50, l.P99, f.P50, f.P99, f.P50/l.P50))
		}
	}
	for _, t := range targets {
		t.c.close()
	}
	r.Seconds = round(total.Seconds(), 3)
	if s := total.Seconds(); s > 0 {
		r.MsgPerSec, r.ReqPerSec = round(float64(r.Messages)/s, 1), round(float64(r.Requests)/s, 1)
	}
	r.Errors = errs.total
	if errs.total > 0 {
		r.ErrorKinds, r.ErrorSamples = errs.kinds, errs.samples()
	}
	r.Extra["leader"] = leader
	if len(followers) > 0 {
		r.Extra["follower"] = followers[0]
	}
	return r, nil
}

// backgroundPushes runs conns producers pushing single messages through
// every node until the returned stop is called.
func backgroundPushes(ctx context.Context, o *options, conns int, errs *tally) (stop func()) {
	lctx, cancel := context.WithCancel(ctx)
	cs := newClients(o.urls, conns, o.timeout)
	pool := newPayloadPool(o.payload)
	queue := queueName("reads-load")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runFor(lctx, conns, time.Hour, func(w int) bool {
			p := newPusher(cs.pick(w), queue, pushPartitions, pool, w)
			for lctx.Err() == nil {
				if v, _ := p.push(lctx, 1); v.bad > 0 && lctx.Err() == nil {
					errs.add(v)
					pause(lctx, errPause)
				}
			}
			return false
		})
	}()
	return func() {
		cancel()
		<-done
		cs.close()
	}
}

// roles asks every node's /health which of them leads.
func roles(ctx context.Context, urls []string) (leader string, followers []string, err error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		leader, followers = "", nil
		for _, u := range urls {
			if h, err := nodeproc.HealthURL(ctx, u); err == nil && h.Raft.Role == "leader" {
				leader = u
			} else {
				followers = append(followers, u)
			}
		}
		if leader != "" {
			return leader, followers, nil
		}
		if time.Now().After(deadline) || !pause(ctx, 100*time.Millisecond) {
			return "", nil, fmt.Errorf("no node of %v says it leads", urls)
		}
	}
}
