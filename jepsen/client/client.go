// Package client is the fault tests' HTTP client: one request at a time,
// each answer classified as a definite success, a definite failure, or an
// unknown outcome.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/jepsen/history"
)

// Client talks to one node at a time (it rotates on failures).
type Client struct {
	ID      int
	urls    []string
	next    int
	http    *http.Client
	Rec     *history.Recorder
	Timeout time.Duration
	// Tenant, when set, names the tenant of every request (x-queen-tenant;
	// the nodes run with --trust-tenant-header).
	Tenant string
}

// New makes client id over the given node URLs.
func New(id int, urls []string, rec *history.Recorder) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
	return &Client{ID: id, urls: urls, next: id % max(len(urls), 1), Rec: rec, Timeout: 5 * time.Second,
		http: &http.Client{Transport: tr}}
}

// SetURLs replaces the node list (membership changed).
func (c *Client) SetURLs(urls []string) { c.urls = urls }

// Result is an HTTP answer.
type Result struct {
	Status int
	Body   []byte
	Header http.Header
}

// Do sends one request to the current node. It classifies the answer:
// 2xx and 4xx are definite (the caller reads them); a 503 with code
// no_leader/retry/timeout before proposing is a definite failure; anything else
// (5xx outcome_unknown, a timeout, a broken connection) is unknown. On
// anything but a definite answer the client moves to the next node.
func (c *Client) Do(ctx context.Context, method, path string, body any, hdr map[string]string) (*Result, history.Status, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, history.Fail, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	url := c.urls[c.next%len(c.urls)]
	req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
	if err != nil {
		return nil, history.Fail, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Tenant != "" {
		req.Header.Set("X-Queen-Tenant", c.Tenant)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.next++
		var ne net.Error
		if errors.As(err, &ne) && !ne.Timeout() && isRefused(err) {
			return nil, history.Fail, err // never reached the node
		}
		return nil, history.Unknown, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.next++
		return nil, history.Unknown, err
	}
	r := &Result{Status: resp.StatusCode, Body: b, Header: resp.Header}
	switch {
	case resp.StatusCode < 500:
		return r, history.OK, nil
	case resp.StatusCode == http.StatusServiceUnavailable:
		c.next++
		var e struct {
			Code string `json:"code"`
		}
		json.Unmarshal(b, &e)
		switch e.Code {
		case "no_leader", "retry", "not_leader", "shutting_down", "timeout", "kv_disabled", "timers_disabled":
			return r, history.Fail, fmt.Errorf("503 %s", e.Code)
		}
		return r, history.Unknown, fmt.Errorf("503 %s", e.Code)
	default:
		c.next++
		return r, history.Unknown, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

func isRefused(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}
