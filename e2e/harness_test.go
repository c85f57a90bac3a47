package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// binPath is the queen-node binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "queen-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binPath, err = nodeproc.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// nodeOpts are the flags a test may choose; nodeproc fills in the node id,
// the data dir and the addresses.
type nodeOpts struct {
	SnapshotThreshold       int
	SnapshotInterval        time.Duration
	DefaultSubscriptionMode string // "" = the binary's default
	RetentionIntervalMs     int
	Kafka                   bool // the Kafka listener on, at the node's Addrs().Kafka
	Extra                   []string
	// DataDir, when set, is used instead of a fresh temporary directory
	// (to start a node on a copy of another node's files).
	DataDir string
	// Node, when set, adjusts cluster node i's spec (1-based) before it is
	// made (nodeproc.ClusterConfig.Node).
	Node func(i int, s *nodeproc.Spec) error
}

func (o nodeOpts) flags() []string {
	var a []string
	if o.SnapshotThreshold > 0 {
		a = append(a, "--snapshot-threshold", fmt.Sprint(o.SnapshotThreshold))
	}
	if o.SnapshotInterval > 0 {
		a = append(a, "--snapshot-interval", o.SnapshotInterval.String())
	}
	if o.DefaultSubscriptionMode != "" {
		a = append(a, "--default-subscription-mode", o.DefaultSubscriptionMode)
	}
	if o.RetentionIntervalMs > 0 {
		a = append(a, "--retention-interval-ms", fmt.Sprint(o.RetentionIntervalMs))
	}
	return append(a, o.Extra...)
}

// node is one queen-node process a test started (nodeproc.Node) with the
// test's own keep-alive HTTP client. Its lower-case lifecycle methods fail
// the test instead of returning an error.
type node struct {
	*nodeproc.Node
	t      testing.TB
	client *http.Client
	tr     *http.Transport
}

// testNode wraps pn for t: when the test ends the process is killed if
// still running, a process that exited on its own fails the test, and the
// node's log is printed if the test failed.
func testNode(t testing.TB, pn *nodeproc.Node) *node {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		TLSClientConfig:     pn.ClientTLS(),
	}
	n := &node{Node: pn, t: t, tr: tr, client: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
	t.Cleanup(func() {
		if n.Crashed() {
			t.Errorf("node %s exited on its own (not stopped by the test): %v", n.ID(), n.ExitErr())
		}
		if err := n.Kill(); err != nil {
			t.Error(err)
		}
		tr.CloseIdleConnections()
		if t.Failed() {
			n.dumpLog()
		}
	})
	return n
}

// startNode starts a fresh single-node broker and waits until /health is
// 200.
func startNode(t testing.TB, opts nodeOpts) *node {
	t.Helper()
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	if opts.DataDir != "" {
		dataDir = opts.DataDir
	}
	pn, err := nodeproc.NewNode(nodeproc.Spec{Bin: binPath, ID: "n1", DataDir: dataDir,
		LogPath: filepath.Join(base, "stderr.log"), Flags: opts.flags(), Kafka: opts.Kafka})
	if err != nil {
		t.Fatal(err)
	}
	n := testNode(t, pn)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

// launch starts the process without waiting for /health.
func (n *node) launch() {
	n.t.Helper()
	if err := n.Launch(); err != nil {
		n.t.Fatal(err)
	}
	n.tr.CloseIdleConnections()
}

// restart starts the node again on the same data dir and ports and waits
// for /health.
func (n *node) restart() {
	n.t.Helper()
	if err := n.Restart(context.Background()); err != nil {
		n.t.Fatal(err)
	}
	n.tr.CloseIdleConnections()
}

// kill9 sends SIGKILL and waits for the exit.
func (n *node) kill9() {
	n.t.Helper()
	if err := n.Kill(); err != nil {
		n.t.Error(err)
	}
	n.tr.CloseIdleConnections()
}

// sigterm sends SIGTERM and waits up to timeout for the exit. It returns
// the exit code and how long the exit took; code -1 means it did not exit
// in time (the process was then killed with SIGKILL).
func (n *node) sigterm(timeout time.Duration) (int, time.Duration) {
	n.t.Helper()
	code, took, err := n.Terminate(timeout)
	if err != nil {
		n.t.Fatal(err)
	}
	n.tr.CloseIdleConnections()
	return code, took
}

// requireRunning fails the test if the process died.
func (n *node) requireRunning() {
	n.t.Helper()
	if !n.Running() {
		n.t.Fatalf("node %s is not running (crashed?): %v", n.ID(), n.ExitErr())
	}
}

// dumpLog prints the end of the node's log to the test log.
func (n *node) dumpLog() {
	n.t.Logf("----- log of node %s (%s) -----\n%s----- end of the log of node %s -----", n.ID(), n.LogPath(), n.Tail(1500), n.ID())
}

func (n *node) url(path string) string { return n.URL() + path }

// ---------------------------------------------------------------------------
// HTTP plumbing.

// response is one HTTP answer, body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *response) String() string {
	return fmt.Sprintf("HTTP %d %s", r.Status, bytes.TrimSpace(r.Body))
}

// decode unmarshals the body into v, failing the test on bad JSON.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r, err)
	}
}

// do sends one request; body is marshalled as JSON unless it is a string or
// []byte (sent as is) or nil. A transport error is returned, not fatal.
func (n *node) do(ctx context.Context, method, path string, body any) (*response, error) {
	return n.request(ctx, method, path, body, nil)
}

// send is do with a timeout and headers (for worker goroutines and
// retries: it never fails the test).
func (n *node) send(timeout time.Duration, method, path string, body any, hdr map[string]string) (*response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.request(ctx, method, path, body, hdr)
}

func (n *node) request(ctx context.Context, method, path string, body any, hdr map[string]string) (*response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.url(path), rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if tok := n.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// getJSON runs one GET with a short deadline and decodes the body, whatever
// the status.
func (n *node) getJSON(path string, timeout time.Duration, v any) error {
	r, err := n.send(timeout, "GET", path, nil, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("GET %s on %s: %s: %v", path, n.ID(), r, err)
	}
	return nil
}

// errCode is the "code" of an error body ("" if none).
func errCode(r *response) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Code
}
