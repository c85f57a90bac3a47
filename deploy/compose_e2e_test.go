package deploy

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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// The image's gossip port: --join names the other services on it.
const imageGossipPort = "6635"

// composeNode is how one compose service runs on loopback: the compose
// command and environment, with the service names turned into 127.0.0.1
// addresses and the /run/secrets paths into the script's files.
type composeNode struct {
	name  string
	flags []string
	env   []string
}

// loopbackNodes adapts every service of c to processes on addrs (by
// service name), with the secrets of dir.
func loopbackNodes(t *testing.T, c compose, dir string, addrs map[string]nodeproc.Addrs) []composeNode {
	t.Helper()
	var out []composeNode
	for _, name := range slices.Sorted(mapKeys(c.Services)) {
		s := c.Services[name]
		files := map[string]string{} // container path -> file on this host
		for _, sec := range s.Secrets {
			def, ok := c.Secrets[sec.Source]
			if !ok {
				t.Fatalf("%s: secret %q is not declared", name, sec.Source)
			}
			files[sec.Path()] = generated(t, dir, def.File)
		}
		local := func(v string) string {
			if f, ok := files[v]; ok {
				return f
			}
			if strings.HasPrefix(v, "/run/secrets/") {
				t.Fatalf("%s: %s is not a secret this service mounts", name, v)
			}
			return v
		}
		n := composeNode{name: name}
		for _, a := range s.Command {
			flag, v, ok := strings.Cut(a, "=")
			if !ok {
				t.Fatalf("%s: command %q: want --name=value", name, a)
			}
			switch strings.TrimLeft(flag, "-") {
			case "advertise-addr":
				if _, ok := addrs[v]; !ok {
					t.Fatalf("%s: --advertise-addr=%s is not a service", name, v)
				}
				v = "127.0.0.1" // every node's ports are its own
			case "join":
				var join []string
				for _, j := range strings.Split(v, ",") {
					host, port, err := net.SplitHostPort(strings.TrimSpace(j))
					a, ok := addrs[host]
					if err != nil || !ok || port != imageGossipPort {
						t.Fatalf("%s: --join entry %q: want <service>:%s", name, j, imageGossipPort)
					}
					join = append(join, a.Gossip)
				}
				v = strings.Join(join, ",")
			}
			n.flags = append(n.flags, flag+"="+local(v))
		}
		for _, k := range slices.Sorted(mapKeys(s.Environment)) {
			n.env = append(n.env, k+"="+local(s.Environment[k]))
		}
		out = append(out, n)
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// buildHealthcheck compiles deploy/healthcheck into dir.
func buildHealthcheck(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "queen-healthcheck")
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./healthcheck").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./deploy/healthcheck: %v\n%s", err, out)
	}
	return bin
}

// TestComposeClusterTLS is docker-compose.yml without Docker: it runs
// deploy/gen-secrets.sh, then three real queen-node processes on loopback
// with exactly the command line and environment the compose file gives each
// service (the service names become 127.0.0.1 and free ports, the
// /run/secrets files the script's), and checks that the cluster forms over
// mutual TLS and an encrypted gossip, that an HTTPS push through a follower
// with the script's admin token gets 201, that no token gets 401 and a
// read-only token 403, and that the image's health check, given the
// service's environment, reports the TLS node healthy.
func TestComposeClusterTLS(t *testing.T) {
	dir := genSecrets(t) // skips without openssl
	c := loadCompose(t)
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := nodeproc.Binary(ctx, "", filepath.Join(work, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	hcBin := buildHealthcheck(ctx, t, filepath.Join(work, "bin"))
	// From here on: two minutes.
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	// Clients check the nodes' certificate against the dev CA, by the
	// address 127.0.0.1 (a name the certificate carries).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	admin, err := os.ReadFile(filepath.Join(dir, "admin.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	adminTok := strings.TrimSpace(string(admin))

	var nodes []*nodeproc.Node
	var specs []composeNode
	stop := func() {
		for _, n := range nodes {
			if err := n.Kill(); err != nil {
				t.Log(err)
			}
		}
	}
	t.Cleanup(stop)
	logs := func() string {
		var b strings.Builder
		for _, n := range nodes {
			fmt.Fprintf(&b, "\n--- %s (%s)\n%s", n.ID(), n.LogPath(), n.Tail(30))
		}
		return b.String()
	}
	// Start, on fresh ports each attempt: a port taken between the pick and
	// the bind ends that attempt.
	for attempt := 1; ; attempt++ {
		picked, err := nodeproc.FreeAddrs(len(c.Services), nil)
		if err != nil {
			t.Fatal(err)
		}
		addrs := map[string]nodeproc.Addrs{}
		for i, name := range slices.Sorted(mapKeys(c.Services)) {
			addrs[name] = picked[i]
		}
		specs = loopbackNodes(t, c, dir, addrs)
		nodes = nil
		for _, s := range specs {
			n, err := nodeproc.NewNode(nodeproc.Spec{Bin: bin, ID: s.name, DataDir: filepath.Join(work, fmt.Sprint(attempt), s.name),
				Addrs: addrs[s.name], Flags: s.flags, Env: s.env, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
			if err := n.Launch(); err != nil {
				t.Fatal(err)
			}
		}
		err = waitFormed(ctx, hc, adminTok, nodes)
		if err == nil {
			break
		}
		raced := false
		for _, n := range nodes {
			raced = raced || (n.Exited() && strings.Contains(n.Tail(50), "address already in use"))
		}
		if !raced || attempt == 3 {
			t.Fatalf("the compose cluster did not form: %v%s", err, logs())
		}
		stop()
	}
	for _, s := range specs {
		t.Logf("%s: queen-node %s, env %s", s.name, strings.Join(s.flags, " "), strings.Join(s.env, " "))
	}

	leader, follower := -1, -1
	for i, n := range nodes {
		h, err := health(ctx, hc, n)
		if err != nil {
			t.Fatal(err)
		}
		if h.Raft.Role == "leader" {
			leader = i
		} else if follower < 0 {
			follower = i
		}
	}
	if leader < 0 || follower < 0 {
		t.Fatalf("leader %d, follower %d%s", leader, follower, logs())
	}

	push := []byte(`{"items":[{"queue":"compose-tls","transactionId":"t1","payload":{"n":1}}]}`)
	via := nodes[follower] // forwarded to the leader over mutual TLS
	status, body := call(ctx, t, hc, http.MethodPost, "https://"+via.Addrs().HTTP+"/api/v1/push", adminTok, push)
	if status != http.StatusCreated {
		t.Fatalf("HTTPS push through follower %s with the admin token: %d %s%s", via.ID(), status, body, logs())
	}
	if status, body := call(ctx, t, hc, http.MethodPost, "https://"+via.Addrs().HTTP+"/api/v1/push", "", push); status != http.StatusUnauthorized {
		t.Errorf("a push without a token: %d %s, want 401", status, body)
	}
	reader := strings.TrimSpace(runScript(t, "token", "-o", dir, "--role", "read-only", "--sub", "reader", "--ttl", "300"))
	if status, body := call(ctx, t, hc, http.MethodPost, "https://"+via.Addrs().HTTP+"/api/v1/push", reader, push); status != http.StatusForbidden {
		t.Errorf("a push with a read-only token: %d %s, want 403", status, body)
	}
	if status, body := call(ctx, t, hc, http.MethodGet, "https://"+nodes[leader].Addrs().HTTP+"/api/v1/resources/queues", reader, nil); status != http.StatusOK {
		t.Errorf("a read with a read-only token: %d %s, want 200", status, body)
	}
	// Plain HTTP to the API port gets no answer the broker would give.
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	if resp, err := plain.Get("http://" + via.Addrs().HTTP + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP /health on the TLS port answered 200")
		}
	}

	// The image's health check, with the service's environment and the
	// address the image would give it (QUEEN_HTTP_ADDR).
	for i, n := range nodes {
		env := append(os.Environ(), specs[i].env...)
		env = append(env, "QUEEN_HTTP_ADDR="+n.Addrs().HTTP)
		out, err := runHealthcheck(ctx, hcBin, env)
		if err != nil || strings.TrimSpace(out) != "healthy" {
			t.Errorf("queen-healthcheck with %s's environment: %v: %s", n.ID(), err, out)
		}
	}
	// Without QUEEN_TLS_CERT it speaks plain HTTP, which a TLS node refuses.
	out, err := runHealthcheck(ctx, hcBin, append(os.Environ(), "QUEEN_TLS_CERT=", "QUEEN_HTTP_ADDR="+via.Addrs().HTTP))
	if err == nil {
		t.Errorf("queen-healthcheck over plain HTTP against a TLS node: healthy (%s)", out)
	}
}

func runHealthcheck(ctx context.Context, bin string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// call sends one request over hc with a bearer token ("" = none) and returns
// the status and body.
func call(ctx context.Context, t *testing.T, hc *http.Client, method, url, token string, body []byte) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func health(ctx context.Context, hc *http.Client, n *nodeproc.Node) (nodeproc.Health, error) {
	var h nodeproc.Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.Addrs().HTTP+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("%s /health: %w", n.ID(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("%s /health: HTTP %d (%+v)", n.ID(), resp.StatusCode, h.Raft)
	}
	return h, nil
}

// waitFormed waits until every node answers /health over HTTPS with 200 and
// names the same leader, and the leader lists every node as a live voter
// (an admin call).
func waitFormed(ctx context.Context, hc *http.Client, token string, nodes []*nodeproc.Node) error {
	last := errors.New("not checked yet")
	for {
		for _, n := range nodes {
			if n.Exited() {
				return fmt.Errorf("%s exited: %v", n.ID(), n.ExitErr())
			}
		}
		last = formed(ctx, hc, token, nodes)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func formed(ctx context.Context, hc *http.Client, token string, nodes []*nodeproc.Node) error {
	leaders := map[string]bool{}
	var leader *nodeproc.Node
	for _, n := range nodes {
		h, err := health(ctx, hc, n)
		if err != nil {
			return err
		}
		leaders[h.Raft.LeaderID] = true
		if h.Raft.Role == "leader" {
			leader = n
		}
	}
	if len(leaders) != 1 || leader == nil {
		return fmt.Errorf("leaders named: %v", leaders)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+leader.Addrs().HTTP+"/api/v1/system/cluster", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var view struct {
		Nodes []struct {
			ID    string `json:"id"`
			Voter bool   `json:"voter"`
			Alive bool   `json:"alive"`
		} `json:"nodes"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("cluster view: HTTP %d %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		return err
	}
	live := 0
	for _, v := range view.Nodes {
		if v.Voter && v.Alive {
			live++
		}
	}
	if live != len(nodes) {
		return fmt.Errorf("the leader sees %d live voters of %d: %+v", live, len(nodes), view.Nodes)
	}
	return nil
}
