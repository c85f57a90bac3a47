package nodeproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	startWait = 30 * time.Second // a start or restart until /health is 200
	killWait  = 10 * time.Second // SIGKILL until the process is gone
)

// Spec says how to run one node. Bin, ID and DataDir are required.
type Spec struct {
	Bin     string // the queen-node binary
	ID      string // --node-id
	DataDir string // --data-dir; created when missing
	LogPath string // the process's stdout and stderr, appended across starts; "" = DataDir + ".log"
	// Addrs are the node's listen addresses; zero = free loopback ports
	// (FreeAddrs), which a start that lost the bind race replaces.
	Addrs Addrs
	// Flags come after the ones nodeproc sets (a flag given twice takes its
	// last value). Pass a boolean as --name or --name=true, never as two
	// arguments.
	Flags []string
	// Env is added to the environment. The caller's own QUEEN_* variables
	// are not passed on: the flags say everything.
	Env []string
	// Wrapper is a command the binary runs under, e.g. {"ip", "netns",
	// "exec", ns}. It must exec the binary in place, so that the PID
	// nodeproc signals is the node's.
	Wrapper []string
	// Prepare runs before every start of the process (the first and each
	// restart), e.g. to mount the data dir; it returns environment entries
	// for this start only.
	Prepare func(n *Node) (env []string, err error)
	// Logf receives node events (started, killed, paused); nil = silent.
	Logf func(format string, args ...any)
	// ClientTLS, when set, says the node serves HTTPS (Flags carry its
	// --tls-cert and --tls-key): URL is https:// and nodeproc's own
	// requests use this client configuration.
	ClientTLS *tls.Config
	// Kafka turns the node's Kafka listener on, at Addrs.Kafka.
	Kafka bool
	// Token, when set, is sent as a bearer token on nodeproc's own
	// requests (a node with JWT on; /health needs none).
	Token string
}

// Node is one queen-node process at a time on one data dir. The id, data
// dir, log and addresses survive restarts; the process does not. Its
// methods may be called from several goroutines.
type Node struct {
	spec Spec
	auto bool     // nodeproc chose the addresses (it may choose again on a lost bind race)
	c    *Cluster // nil for a lone node
	tr   *http.Transport
	hc   *http.Client

	life sync.Mutex // one of Launch, Kill, Terminate, Pause, Resume at a time

	mu      sync.Mutex
	addrs   Addrs
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error         // the current process's Wait result, once done
	stopped bool          // Kill or Terminate ended (or is ending) the current process
	paused  bool
	starts  int
	logOff  int64 // the log's size when the current process started
}

// NewNode prepares a node (no process yet); Start starts it.
func NewNode(s Spec) (*Node, error) {
	if s.Bin == "" || s.ID == "" || s.DataDir == "" {
		return nil, errors.New("nodeproc: a Spec needs Bin, ID and DataDir")
	}
	if s.LogPath == "" {
		s.LogPath = filepath.Clean(s.DataDir) + ".log"
	}
	auto := s.Addrs == (Addrs{})
	if auto {
		a, err := FreeAddrs(1, nil)
		if err != nil {
			return nil, err
		}
		s.Addrs = a[0]
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second, TLSClientConfig: s.ClientTLS}
	return &Node{spec: s, auto: auto, addrs: s.Addrs, tr: tr, hc: &http.Client{Transport: tr}}, nil
}

// StartNode is NewNode and Start: a lone node (--bootstrap-expect 1) that
// answers /health with 200.
func StartNode(ctx context.Context, s Spec) (*Node, error) {
	n, err := NewNode(s)
	if err != nil {
		return nil, err
	}
	return n, n.Start(ctx)
}

// ID is the node's id.
func (n *Node) ID() string { return n.spec.ID }

// DataDir is the node's data dir.
func (n *Node) DataDir() string { return n.spec.DataDir }

// ClientTLS is the client configuration for the node's HTTPS (nil: it
// serves plain HTTP).
func (n *Node) ClientTLS() *tls.Config { return n.spec.ClientTLS }

// Token is the bearer token nodeproc's own requests carry ("" = none).
func (n *Node) Token() string { return n.spec.Token }

// LogPath is the file the node's output goes to.
func (n *Node) LogPath() string { return n.spec.LogPath }

// Addrs are the node's listen addresses.
func (n *Node) Addrs() Addrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs
}

// URL is the node's HTTP base URL (https:// with Spec.ClientTLS).
func (n *Node) URL() string {
	if n.spec.ClientTLS != nil {
		return "https://" + n.Addrs().HTTP
	}
	return "http://" + n.Addrs().HTTP
}

// Args are the queen-node arguments of the next start: id, data dir,
// addresses, --bootstrap-expect, --join (in a cluster), then Spec.Flags.
func (n *Node) Args() []string {
	a := n.Addrs()
	expect, join := 1, ""
	if n.c != nil {
		expect, join = n.c.expect, n.c.joinList()
	}
	args := []string{"--node-id", n.spec.ID, "--data-dir", n.spec.DataDir,
		"--http-addr", a.HTTP, "--grpc-addr", a.GRPC, "--raft-addr", a.Raft, "--gossip-addr", a.Gossip,
		"--bootstrap-expect", strconv.Itoa(expect)}
	if join != "" && join != a.Gossip {
		args = append(args, "--join", join)
	}
	if n.spec.Kafka && a.Kafka != "" {
		args = append(args, "--kafka-addr", a.Kafka)
	}
	return append(args, n.spec.Flags...)
}

func (n *Node) logf(format string, args ...any) {
	if n.spec.Logf != nil {
		n.spec.Logf(format, args...)
	}
}

// Start launches the process and waits (up to 30 s) until /health is 200.
// When nodeproc chose the ports and the process could not bind one
// (another program took it in the meantime), it picks new ports and tries
// again, three times in all. A process that never became healthy is
// killed.
func (n *Node) Start(ctx context.Context) error { return n.start(ctx, n.auto) }

// Restart starts a node that has exited again, on the same data dir and
// ports, and waits until /health is 200. A port still taken (another
// program holds it for a moment) is waited for: up to five tries, a second
// apart.
func (n *Node) Restart(ctx context.Context) error {
	if n.Running() {
		return fmt.Errorf("nodeproc: restart %s: still running", n.spec.ID)
	}
	return n.start(ctx, false)
}

func (n *Node) start(ctx context.Context, retry bool) error {
	for attempt := 1; ; attempt++ {
		if err := n.Launch(); err != nil {
			return err
		}
		err := n.WaitHealthy(ctx, startWait)
		if err == nil {
			return nil
		}
		if retry && attempt < 3 && n.lostBindRace() {
			if err := n.newAddrs(); err != nil {
				return err
			}
			n.logf("%s lost a port race; starting it on new ports", n.spec.ID)
			continue
		}
		if !retry && attempt < 5 && n.lostBindRace() {
			n.logf("%s: a port of its own is taken; trying again in a second", n.spec.ID)
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Second):
			}
			continue
		}
		if kerr := n.Kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return err
	}
}

// lostBindRace reports whether the last process exited because a port was
// taken.
func (n *Node) lostBindRace() bool {
	n.mu.Lock()
	off := n.logOff
	n.mu.Unlock()
	return n.Exited() && strings.Contains(n.LogSince(off), "address already in use")
}

// newAddrs gives the node fresh loopback ports, none its cluster uses.
func (n *Node) newAddrs() error {
	avoid := map[string]bool{}
	if n.c != nil {
		avoid = n.c.addrsInUse()
	}
	for _, a := range n.Addrs().list() {
		avoid[a] = true
	}
	a, err := FreeAddrs(1, avoid)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.addrs = a[0]
	n.mu.Unlock()
	return nil
}

// Launch starts the process without waiting for it to be healthy. The
// previous process must have exited.
func (n *Node) Launch() error {
	n.life.Lock()
	defer n.life.Unlock()
	if n.Running() {
		return fmt.Errorf("nodeproc: start %s: already running", n.spec.ID)
	}
	env := append(callerEnv(), n.spec.Env...)
	if n.spec.Prepare != nil {
		more, err := n.spec.Prepare(n)
		if err != nil {
			return fmt.Errorf("nodeproc: prepare %s: %w", n.spec.ID, err)
		}
		env = append(env, more...)
	}
	for _, d := range []string{n.spec.DataDir, filepath.Dir(n.spec.LogPath)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("nodeproc: %w", err)
		}
	}
	logf, err := os.OpenFile(n.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("nodeproc: %w", err)
	}
	off, _ := logf.Seek(0, 2)
	argv := append(append(append([]string{}, n.spec.Wrapper...), n.spec.Bin), n.Args()...)
	n.mu.Lock()
	n.starts++
	fmt.Fprintf(logf, "===== nodeproc: start #%d of node %s at %s: %s\n", n.starts, n.spec.ID,
		time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	n.mu.Unlock()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, env
	// If the program that started the node dies, the node dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("nodeproc: start %s: %w", n.spec.ID, err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.waitErr, n.stopped, n.paused, n.logOff = cmd, done, nil, false, false, off
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
	n.logf("started %s (pid %d)", n.spec.ID, cmd.Process.Pid)
	return nil
}

// callerEnv is this program's environment without queen-node's variables.
func callerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") && !strings.HasPrefix(kv, "DEFAULT_SUBSCRIPTION_MODE=") {
			env = append(env, kv)
		}
	}
	return env
}

// current is the current process (nil before the first start), its done
// channel and whether it is paused.
func (n *Node) current() (*exec.Cmd, chan struct{}, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd, n.done, n.paused
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process and waits (up to 10 s) until it is
// gone. A node that is not running is left alone.
func (n *Node) Kill() error {
	n.life.Lock()
	defer n.life.Unlock()
	return n.kill()
}

func (n *Node) kill() error {
	cmd, done, paused := n.current()
	if cmd == nil || isClosed(done) {
		return nil
	}
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	pid := cmd.Process.Pid
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("nodeproc: kill -9 %s (pid %d): %w", n.spec.ID, pid, err)
	}
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-done:
	case <-time.After(killWait):
		return fmt.Errorf("nodeproc: %s (pid %d) did not exit %v after SIGKILL", n.spec.ID, pid, killWait)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	n.tr.CloseIdleConnections()
	n.logf("killed %s (pid %d)", n.spec.ID, pid)
	return nil
}

// Terminate sends SIGTERM (after SIGCONT if paused) and waits up to
// timeout for the exit; then it sends SIGKILL. It returns the exit code
// (-1 when the process had to be killed) and how long the exit took.
func (n *Node) Terminate(timeout time.Duration) (code int, took time.Duration, err error) {
	n.life.Lock()
	defer n.life.Unlock()
	cmd, done, paused := n.current()
	if cmd == nil || isClosed(done) {
		return -1, 0, fmt.Errorf("nodeproc: terminate %s: not running", n.spec.ID)
	}
	n.mu.Lock()
	n.stopped = true
	n.paused = false
	n.mu.Unlock()
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, 0, fmt.Errorf("nodeproc: kill -TERM %s (pid %d): %w", n.spec.ID, cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		took := time.Since(start)
		n.logf("%s ignored SIGTERM for %v; sending SIGKILL", n.spec.ID, timeout)
		return -1, took, n.kill()
	}
	took = time.Since(start)
	n.tr.CloseIdleConnections()
	n.logf("terminated %s (pid %d, exit %d after %v)", n.spec.ID, cmd.Process.Pid, cmd.ProcessState.ExitCode(), took)
	return cmd.ProcessState.ExitCode(), took, nil
}

// Pause stops the process with SIGSTOP. A node that is not running or
// already paused is left as it is.
func (n *Node) Pause() error { return n.stopCont(true) }

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error { return n.stopCont(false) }

func (n *Node) stopCont(pause bool) error {
	n.life.Lock()
	defer n.life.Unlock()
	cmd, done, paused := n.current()
	if cmd == nil || isClosed(done) || paused == pause {
		return nil
	}
	sig, what := syscall.SIGCONT, "resumed"
	if pause {
		sig, what = syscall.SIGSTOP, "paused"
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("nodeproc: %s %s: %w", sig, n.spec.ID, err)
	}
	waitStopped(cmd.Process.Pid, pause)
	n.mu.Lock()
	n.paused = pause
	n.mu.Unlock()
	n.logf("%s %s", what, n.spec.ID)
	return nil
}

// waitStopped waits (up to a second) until the kernel shows the process
// stopped, or no longer stopped: a signal is delivered asynchronously, and
// a "paused" node must not answer one more request.
func waitStopped(pid int, stopped bool) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // not Linux, or gone
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return
		}
		if st := b[i+2]; (st == 'T' || st == 't') == stopped {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Running reports whether the process was started and has not exited (a
// paused process is running).
func (n *Node) Running() bool {
	cmd, done, _ := n.current()
	return cmd != nil && !isClosed(done)
}

// Exited reports whether the last process started has exited.
func (n *Node) Exited() bool {
	cmd, done, _ := n.current()
	return cmd != nil && isClosed(done)
}

// Paused reports whether the process is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	_, _, paused := n.current()
	return paused
}

// Crashed reports whether the last process exited without Kill or
// Terminate asking it to.
func (n *Node) Crashed() bool {
	n.mu.Lock()
	stopped := n.stopped
	n.mu.Unlock()
	return n.Exited() && !stopped
}

// ExitErr is the last process's exit as os/exec reports it (nil while it
// runs, or when it exited 0).
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// PID is the running process's id (0 when none runs).
func (n *Node) PID() int {
	cmd, done, _ := n.current()
	if cmd == nil || isClosed(done) {
		return 0
	}
	return cmd.Process.Pid
}
