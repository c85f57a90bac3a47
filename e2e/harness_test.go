package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	binPath = filepath.Join(dir, "queen-node")
	if err := buildBinary(binPath); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build queen-node:", err)
		return 1
	}
	return m.Run()
}

// buildBinary compiles ./cmd/queen-node (the module root is the parent of
// this package's directory) into out.
func buildBinary(out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "./cmd/queen-node")
	cmd.Dir = ".."
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v\n%s", err, buf.String())
	}
	return nil
}

// nodeOpts are the flags a test may choose; the harness fills in the node
// id, the data dir and the addresses.
type nodeOpts struct {
	SnapshotThreshold       int
	SnapshotInterval        time.Duration
	DefaultSubscriptionMode string // "" = the binary's default
	RetentionIntervalMs     int
	Extra                   []string
	// DataDir, when set, is used instead of a fresh temporary directory
	// (to start a node on a copy of another node's files).
	DataDir string
}

// node is one queen-node process the test started. The data dir and the
// ports survive restarts; the process does not.
type node struct {
	t       testing.TB
	id      string
	dataDir string
	logPath string
	opts    nodeOpts

	httpAddr, raftAddr, grpcAddr, gossipAddr string

	client *http.Client
	tr     *http.Transport

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current process has exited
	waitErr  error         // the current process's Wait result, once done
	expected bool          // the test stopped the current process on purpose
	starts   int
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all are chosen, so the ports are distinct; they are closed
// before the node binds them (a small race the harness accepts).
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		lns = append(lns, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// startNode starts a fresh single-node broker and waits until /health is
// 200. The process is killed (SIGKILL) when the test ends if still running,
// and its stderr is printed if the test failed.
func startNode(t testing.TB, opts nodeOpts) *node {
	t.Helper()
	base := t.TempDir()
	addrs := freePorts(t, 4)
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	dataDir := filepath.Join(base, "data")
	if opts.DataDir != "" {
		dataDir = opts.DataDir
	}
	n := &node{
		t: t, id: "n1", dataDir: dataDir, logPath: filepath.Join(base, "stderr.log"),
		opts: opts, httpAddr: addrs[0], raftAddr: addrs[1], grpcAddr: addrs[2], gossipAddr: addrs[3],
		tr: tr, client: &http.Client{Transport: tr, Timeout: 20 * time.Second},
	}
	t.Cleanup(func() {
		n.mu.Lock()
		running := n.cmd != nil && !isClosed(n.done)
		unexpected := n.cmd != nil && isClosed(n.done) && !n.expected
		werr := n.waitErr
		n.mu.Unlock()
		if running {
			n.kill9()
		}
		if unexpected {
			t.Errorf("node %s exited on its own (not stopped by the test): %v", n.id, werr)
		}
		tr.CloseIdleConnections()
		if t.Failed() {
			n.dumpLog()
		}
	})
	n.start()
	return n
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (n *node) args() []string {
	a := []string{
		"--node-id", n.id, "--data-dir", n.dataDir,
		"--http-addr", n.httpAddr, "--raft-addr", n.raftAddr,
		"--grpc-addr", n.grpcAddr, "--gossip-addr", n.gossipAddr,
		"--bootstrap-expect", "1",
	}
	if n.opts.SnapshotThreshold > 0 {
		a = append(a, "--snapshot-threshold", fmt.Sprint(n.opts.SnapshotThreshold))
	}
	if n.opts.SnapshotInterval > 0 {
		a = append(a, "--snapshot-interval", n.opts.SnapshotInterval.String())
	}
	if n.opts.DefaultSubscriptionMode != "" {
		a = append(a, "--default-subscription-mode", n.opts.DefaultSubscriptionMode)
	}
	if n.opts.RetentionIntervalMs > 0 {
		a = append(a, "--retention-interval-ms", fmt.Sprint(n.opts.RetentionIntervalMs))
	}
	return append(a, n.opts.Extra...)
}

// start launches the process (the previous one must have exited) and waits
// for /health. If the process could not bind one of its ports (another
// program took a port the harness had found free), it picks new ports and
// tries again, up to 3 times.
func (n *node) start() {
	n.t.Helper()
	for attempt := 1; ; attempt++ {
		var offset int64
		if fi, err := os.Stat(n.logPath); err == nil {
			offset = fi.Size()
		}
		n.launch()
		err := n.healthy(20 * time.Second)
		if err == nil {
			return
		}
		if attempt < 3 && n.exited() && n.logSince(offset, "address already in use") {
			addrs := freePorts(n.t, 4)
			n.httpAddr, n.raftAddr, n.grpcAddr, n.gossipAddr = addrs[0], addrs[1], addrs[2], addrs[3]
			continue
		}
		n.t.Fatal(err)
	}
}

// logSince reports whether the node's stderr from offset on contains s.
func (n *node) logSince(offset int64, s string) bool {
	b, err := os.ReadFile(n.logPath)
	if err != nil || int64(len(b)) < offset {
		return false
	}
	return bytes.Contains(b[offset:], []byte(s))
}

// launch starts the process on the node's data dir and ports without
// waiting for it to be healthy.
func (n *node) launch() {
	n.t.Helper()
	n.mu.Lock()
	if n.cmd != nil && !isClosed(n.done) {
		n.mu.Unlock()
		n.t.Fatalf("node %s: start while still running", n.id)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.mu.Unlock()
		n.t.Fatalf("node log: %v", err)
	}
	n.starts++
	fmt.Fprintf(logf, "===== e2e: start #%d of node %s at %s: %s %s\n", n.starts, n.id,
		time.Now().Format(time.RFC3339Nano), binPath, strings.Join(n.args(), " "))
	cmd := exec.Command(binPath, n.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Environment: the node must not pick up QUEEN_* settings of the caller.
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") && !strings.HasPrefix(kv, "DEFAULT_SUBSCRIPTION_MODE=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	// If the test binary dies, the node dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.mu.Unlock()
		n.t.Fatalf("start node: %v", err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.waitErr, n.expected = cmd, done, nil, false
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		close(done)
	}()
	n.tr.CloseIdleConnections()
}

// pid is the current process's id.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// exited reports whether the current process has exited.
func (n *node) exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return isClosed(n.done)
}

// exitErr is the current process's Wait result (nil while it runs).
func (n *node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// requireRunning fails the test if the process died.
func (n *node) requireRunning() {
	n.t.Helper()
	n.mu.Lock()
	dead, err := isClosed(n.done), n.waitErr
	n.mu.Unlock()
	if dead {
		n.t.Fatalf("node %s is not running (crashed?): %v", n.id, err)
	}
}

// kill9 sends SIGKILL to the node's process (by PID) and waits for it to
// exit.
func (n *node) kill9() {
	n.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	if cmd == nil || isClosed(done) {
		n.mu.Unlock()
		return
	}
	n.expected = true
	n.mu.Unlock()
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		n.t.Errorf("kill -9 %d: %v", cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		n.t.Errorf("node %s (pid %d) did not exit 10s after SIGKILL", n.id, cmd.Process.Pid)
	}
	n.tr.CloseIdleConnections()
}

// sigterm sends SIGTERM and waits up to timeout for the exit. It returns
// the exit code and how long the exit took; code -1 means it did not exit
// in time (the process is then killed with SIGKILL).
func (n *node) sigterm(timeout time.Duration) (int, time.Duration) {
	n.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	if cmd == nil || isClosed(done) {
		n.mu.Unlock()
		n.t.Fatalf("sigterm: node %s not running", n.id)
	}
	n.expected = true
	n.mu.Unlock()
	start := time.Now()
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		n.t.Fatalf("kill -TERM %d: %v", cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		n.kill9()
		return -1, time.Since(start)
	}
	took := time.Since(start)
	n.tr.CloseIdleConnections()
	return cmd.ProcessState.ExitCode(), took
}

// restart starts the node again on the same data dir and ports.
func (n *node) restart() {
	n.t.Helper()
	if !n.exited() {
		n.t.Fatalf("restart: node %s still running", n.id)
	}
	n.start()
}

// waitHealthy polls GET /health until 200, failing the test after timeout
// or when the process exits.
func (n *node) waitHealthy(timeout time.Duration) {
	n.t.Helper()
	if err := n.healthy(timeout); err != nil {
		n.t.Fatal(err)
	}
}

// healthy polls GET /health until 200; an error after timeout or when the
// process exits.
func (n *node) healthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for i := 0; time.Now().Before(deadline) && i < 10000; i++ {
		if n.exited() {
			return fmt.Errorf("node %s exited before it was healthy: %v", n.id, n.exitErr())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url("/health"), nil)
		resp, err := n.client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			cancel()
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node %s not healthy after %v: %s", n.id, timeout, last)
}

func (n *node) url(path string) string { return "http://" + n.httpAddr + path }

// dumpLog prints the node's stderr (the last 200 KiB) to the test log.
func (n *node) dumpLog() {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		n.t.Logf("node %s: no stderr log: %v", n.id, err)
		return
	}
	const max = 200 << 10
	if len(b) > max {
		b = append([]byte("...(truncated)...\n"), b[len(b)-max:]...)
	}
	n.t.Logf("----- stderr of node %s (%s) -----\n%s----- end of stderr of node %s -----", n.id, n.logPath, b, n.id)
}

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
