package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/queen-node/queen-node/nodeproc"
)

// natsVersion is the NATS server the comparison runs against, installed
// from the Go module proxy (go install), never vendored.
const natsVersion = "v2.15.2"

// natsServerBin returns a nats-server binary: $NATS_SERVER_BIN, or one
// installed once into the user cache dir with go install.
func natsServerBin(ctx context.Context, stderr io.Writer) (string, error) {
	if b := os.Getenv("NATS_SERVER_BIN"); b != "" {
		return b, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "queen-node-bench", "nats-server-"+natsVersion)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(stderr, "bench: installing nats-server %s from the Go module proxy into %s\n", natsVersion, dir)
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/nats-io/nats-server/v2@"+natsVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install nats-server: %w", err)
	}
	return bin, nil
}

// natsCluster is n nats-server processes with JetStream (file storage)
// clustered over routes on loopback.
type natsCluster struct {
	procs []*exec.Cmd
	urls  []string
	dir   string
}

// startNats starts an n-node JetStream cluster in dir. syncAlways sets
// jetstream.sync_interval: always (fsync of every write); otherwise NATS's
// default (the OS flushes, NATS syncs every 2 minutes).
func startNats(ctx context.Context, bin, dir string, n int, syncAlways bool, stderr io.Writer) (*natsCluster, error) {
	addrs, err := nodeproc.FreeAddrs(n, nil)
	if err != nil {
		return nil, err
	}
	c := &natsCluster{dir: dir}
	var routes []string
	for _, a := range addrs {
		routes = append(routes, "nats://"+a.Raft)
	}
	for i, a := range addrs {
		name := fmt.Sprintf("n%d", i+1)
		sync := ""
		if syncAlways {
			sync = "\n  sync_interval: always"
		}
		conf := fmt.Sprintf(`server_name: %s
listen: %s
http: %s
jetstream {
  store_dir: %q%s
}
cluster {
  name: bench
  listen: %s
  routes: [%s]
}
`, name, a.HTTP, a.GRPC, filepath.Join(dir, name), sync, a.Raft, strings.Join(routes, ", "))
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			c.stop()
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd := exec.Command(bin, "-c", path)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			c.stop()
			return nil, err
		}
		logf.Close()
		c.procs = append(c.procs, cmd)
		c.urls = append(c.urls, "nats://"+a.HTTP)
	}
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitReady waits until JetStream answers with a meta leader.
func (c *natsCluster) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if last = c.probe(ctx); last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nats cluster not ready after %v: %v", within, last)
}

func (c *natsCluster) probe(ctx context.Context) error {
	for _, u := range c.urls {
		host := strings.TrimPrefix(u, "nats://")
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return err
		}
		conn.Close()
	}
	nc, err := nats.Connect(strings.Join(c.urls, ","), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(pctx)
	return err
}

// pids are the server processes, for CPU accounting.
func (c *natsCluster) pids() []int {
	var out []int
	for _, p := range c.procs {
		out = append(out, p.Process.Pid)
	}
	return out
}

// stop terminates every server it started (SIGTERM, then SIGKILL).
func (c *natsCluster) stop() {
	for _, p := range c.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	c.procs = nil
}

var errNoNats = errors.New("nats: no servers")
