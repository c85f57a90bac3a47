package ctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The thin HTTP layer: the admin routes as raw JSON, so that -o json prints
// the API's answer as it came. It shares its *http.Client (TLS) and token
// with the Go client (queen.Client) that drain pops and acks with.

// apiError is an answer of the API other than 2xx: its {"error"} text, the
// machine code when it gave one, and the HTTP status.
type apiError struct {
	Status int
	Msg    string
	Code   string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("HTTP %d: %s", e.Status, e.Msg)
	if e.Code != "" && e.Code != e.Msg {
		s += " (" + e.Code + ")"
	}
	return s
}

// isStatus reports whether err is the API's answer with that status.
func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status
}

// api calls one node's HTTP API.
type api struct {
	base   string // scheme://host:port, no trailing slash
	hc     *http.Client
	token  string
	tenant string // --tenant: the x-queen-tenant header ("" = none)
}

// httpClient is the client every request goes through: the TLS options,
// a proxy from the environment, and --timeout on each request.
func httpClient(g globals) (*http.Client, error) {
	tc := &tls.Config{InsecureSkipVerify: g.insecure} //nolint:gosec // the operator asked for it
	if g.ca != "" {
		pem, err := os.ReadFile(g.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca: %s holds no PEM certificate", g.ca)
		}
		tc.RootCAs = pool
	}
	if g.cert != "" {
		pair, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: g.timeout}, nil
}

// at is the same API on another node (its advertised host:port, the same
// scheme).
func (a *api) at(hostport string) *api {
	scheme := "http://"
	if strings.HasPrefix(a.base, "https://") {
		scheme = "https://"
	}
	return &api{base: scheme + hostport, hc: a.hc, token: a.token, tenant: a.tenant}
}

// unbounded is the same API without --timeout: for one request that may
// rightly run long (a purge of many dead letters); Ctrl-C still ends it.
func (a *api) unbounded() *api {
	hc := *a.hc
	hc.Timeout = 0
	return &api{base: a.base, hc: &hc, token: a.token, tenant: a.tenant}
}

// attempts bounds the sends of one call; retries only happen when the
// node said nothing was done (see retryable).
const attempts = 4

// call sends one request (body marshalled as JSON unless nil) and returns
// the body and status of any answer; err is for no answer at all.
// Answers that say nothing was done (503 no_leader or retry, 429
// overloaded, any 503 to a GET) and lost connections of a GET are sent
// again, up to four times in all.
func (a *api) call(ctx context.Context, method, path string, q url.Values, body any) ([]byte, int, error) {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		payload = b
	}
	target := a.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	for try := 1; ; try++ {
		b, status, retryAfter, err := a.once(ctx, method, target, payload)
		again := try < attempts && ctx.Err() == nil &&
			((err != nil && method == http.MethodGet) || (err == nil && retryable(method, status, b)))
		if !again {
			if err != nil {
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err
				}
				return nil, 0, fmt.Errorf("%s %s: %w", method, target, err)
			}
			return b, status, nil
		}
		wait := time.Duration(try) * 250 * time.Millisecond
		if retryAfter > 0 {
			wait = min(retryAfter, 2*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (a *api) once(ctx context.Context, method, target string, payload []byte) ([]byte, int, time.Duration, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, 0, 0, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if a.tenant != "" {
		req.Header.Set("X-Queen-Tenant", a.tenant)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, 0, err
	}
	var after time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		after = time.Duration(s) * time.Second
	}
	return b, resp.StatusCode, after, nil
}

// retryable: the node did nothing and says so (addendum §4.9), or the
// request only reads.
func retryable(method string, status int, body []byte) bool {
	switch status {
	case http.StatusServiceUnavailable:
		if method == http.MethodGet {
			return true
		}
		c := errorOf(status, body).Code
		return c == "no_leader" || c == "retry"
	case http.StatusTooManyRequests:
		return errorOf(status, body).Code == "overloaded"
	}
	return false
}

// errorOf reads the API's error body {"error","code"|"reason","detail"}.
func errorOf(status int, body []byte) *apiError {
	var eb struct{ Error, Code, Reason, Detail string }
	_ = json.Unmarshal(body, &eb)
	msg := eb.Error
	if eb.Detail != "" {
		msg += ": " + eb.Detail
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	code := eb.Code
	if code == "" {
		code = eb.Reason
	}
	return &apiError{Status: status, Msg: msg, Code: code}
}

// do is call that turns an answer other than 2xx into an *apiError; when
// out is not nil the body is decoded into it. It returns the body.
func (a *api) do(ctx context.Context, method, path string, q url.Values, body, out any) ([]byte, error) {
	b, status, err := a.call(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	if status < 200 || status > 299 {
		return b, errorOf(status, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return b, fmt.Errorf("%s %s: the answer does not decode: %w", method, path, err)
		}
	}
	return b, nil
}

func (a *api) get(ctx context.Context, path string, q url.Values, out any) ([]byte, error) {
	return a.do(ctx, http.MethodGet, path, q, nil, out)
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }
