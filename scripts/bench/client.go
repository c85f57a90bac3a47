package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// client is a keep-alive HTTP client sized for one scenario's concurrency:
// every worker keeps its own connection open for the whole run.
// bearer is sent as "Authorization: Bearer <bearer>" on every request when
// set (-token: to measure with JWT on).
var bearer string

type client struct {
	base string
	hc   *http.Client
	tr   *http.Transport
}

func newClient(base string, conns int, timeout time.Duration) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSClientConfig:     clientTLS,
	}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: timeout}, tr: tr}
}

func (c *client) close() { c.tr.CloseIdleConnections() }

// clients is one keep-alive client per node URL (-urls); worker w talks to
// clients[w % len(clients)], so a scenario's connections spread evenly over
// the nodes. With one URL it is a single client.
type clients []*client

func newClients(urls []string, conns int, timeout time.Duration) clients {
	per := (conns + len(urls) - 1) / len(urls)
	cs := make(clients, len(urls))
	for i, u := range urls {
		cs[i] = newClient(u, max(per, 1), timeout)
	}
	return cs
}

// pick is worker w's client.
func (cs clients) pick(w int) *client { return cs[w%len(cs)] }

// used is the URLs that n workers talk to.
func (cs clients) used(n int) []string {
	out := make([]string, 0, min(n, len(cs)))
	for i := 0; i < n && i < len(cs); i++ {
		out = append(out, cs[i].base)
	}
	return out
}

func (cs clients) close() {
	for _, c := range cs {
		c.close()
	}
}

// do sends one request and reads the whole response into buf, so the
// connection returns to the pool. The latency runs from sending the request
// to reading the last byte of the response.
func (c *client) do(ctx context.Context, method, path string, body []byte, buf *bytes.Buffer) (int, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	buf.Reset()
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), err
}

// verdict is what one checked response turned out to be.
type verdict struct {
	good   int    // items confirmed: queued by a push, or acked
	bad    int    // failures: 1 for a failed request, else the failed items
	kind   string // failure kind when bad > 0
	detail string
}

func failed(kind, detail string) verdict { return verdict{bad: 1, kind: kind, detail: detail} }

// snippet is the start of a response body, for error samples.
func snippet(b []byte) string {
	const limit = 200
	b = bytes.TrimSpace(b)
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}

// tally counts failures by kind and keeps one sample detail for each of
// the first few kinds.
type tally struct {
	mu      sync.Mutex
	total   int64
	kinds   map[string]int64
	order   []string          // sampled kinds, first seen first
	details map[string]string // kind -> sample detail
}

const maxSamples = 5

func newTally() *tally { return &tally{kinds: map[string]int64{}, details: map[string]string{}} }

func (t *tally) add(v verdict) {
	if v.bad == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(v.kind, int64(v.bad), v.detail)
}

// count adds n failures of kind; the caller holds t.mu.
func (t *tally) count(kind string, n int64, detail string) {
	t.total += n
	t.kinds[kind] += n
	if _, ok := t.details[kind]; !ok && len(t.order) < maxSamples {
		t.details[kind] = detail
		t.order = append(t.order, kind)
	}
}

// merge adds o's counts into t.
func (t *tally) merge(o *tally) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range o.order {
		t.count(k, o.kinds[k], o.details[k])
	}
	for k, n := range o.kinds {
		if _, sampled := o.details[k]; !sampled {
			t.count(k, n, "")
		}
	}
}

// samples is "kind: detail" for each sampled kind.
func (t *tally) samples() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.order))
	for i, k := range t.order {
		out[i] = k + ": " + t.details[k]
	}
	return out
}

// errPause is how long a worker waits after a failure, so a dead node
// yields a bounded number of errors rather than a hot loop.
const errPause = 20 * time.Millisecond

// pause sleeps for d; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runFor runs n workers until d has passed or ctx ends. Each worker calls
// step(w) in a loop and stops early when step returns false. A request in
// flight at the deadline completes (bounded by the client timeout). It
// returns the wall time from start until the last worker stopped.
func runFor(ctx context.Context, n int, d time.Duration, step func(w int) bool) time.Duration {
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if !step(w) {
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
