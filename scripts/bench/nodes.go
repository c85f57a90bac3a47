package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
	"github.com/queen-node/queen-node/nodeproc"
)

// startNodes starts o.start throwaway nodes (nodeproc: a temp dir, free
// loopback ports, joined over gossip when more than one) and points o at
// them. With kvReads (exactly-once or reads selected) the nodes get
// --kv-read-rate 0 first: those scenarios' gets are KV reads outside a
// transaction, which a node otherwise limits to 200/s. The returned func stops the nodes (SIGTERM, up
// to 15 s each, then SIGKILL) and removes the dir unless -keep-data.
func startNodes(ctx context.Context, o *options, kvReads bool, stderr io.Writer) (func(), error) {
	work, err := os.MkdirTemp("", "qn-bench.")
	if err != nil {
		return nil, err
	}
	removeWork := func() {
		if o.keepData {
			fmt.Fprintf(stderr, "bench: kept %s\n", work)
		} else {
			os.RemoveAll(work)
		}
	}
	bin, err := nodeproc.Binary(ctx, o.bin, work)
	if err != nil {
		removeWork()
		return nil, err
	}
	if o.bin == "" && os.Getenv("QN_BIN") == "" {
		rev, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
		fmt.Fprintf(stderr, "bench: node built from the working tree at %s\n", orUnknown(strings.TrimSpace(string(rev))))
	}
	var flags []string
	if kvReads {
		flags = append(flags, "--kv-read-rate", "0")
		fmt.Fprintln(stderr, "bench: exactly-once or reads selected: starting the node(s) with --kv-read-rate 0 (unlimited KV reads outside transactions; the default is 200/s)")
	}
	// Every node serves Kafka too (the kafka scenario's clients), but with
	// -secure: JWT on needs SASL there, which bench does not speak.
	spec := func(_ int, s *nodeproc.Spec) error { s.Kafka = true; return nil }
	if o.secure {
		more, tlsConf, token, err := secureSetup(work)
		if err != nil {
			removeWork()
			return nil, err
		}
		flags, clientTLS, bearer = append(flags, more...), tlsConf, token
		http.DefaultTransport.(*http.Transport).TLSClientConfig = tlsConf // nodeproc.HealthURL's client (reads)
		spec = func(_ int, s *nodeproc.Spec) error { s.ClientTLS, s.Token = tlsConf, token; return nil }
		fmt.Fprintln(stderr, "bench: -secure: HTTPS, TLS gRPC, peer mTLS, an encrypted gossip and JWT on; requests carry an admin token")
	}
	flags = append(flags, strings.Fields(o.nodeArgs)...)
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	var c *nodeproc.Cluster
	if o.degradeFaults() {
		if o.secure {
			removeWork()
			return nil, fmt.Errorf("-failover-faults slow-disk and deaf do not run with -secure")
		}
		fmt.Fprintln(stderr, "bench: failover's slow-disk or deaf: the nodes run on lossyfs disks in network namespaces (jepsen/harness), every round on them")
		if o.faulty, err = harness.Start(ctx, harness.Options{Nodes: o.start, Bin: bin, Dir: work, NetNS: true, LossyFS: true,
			Extra: flags, Logf: logf}); err != nil {
			removeWork()
			return nil, err
		}
		c = o.faulty.Procs()
	} else if c, err = nodeproc.StartCluster(ctx, nodeproc.ClusterConfig{Bin: bin, Dir: work, Nodes: o.start, Flags: flags, Logf: logf, Node: spec}); err != nil {
		removeWork()
		return nil, err
	}
	o.cluster, o.urls = c, c.URLs()
	o.url = o.urls[0]
	for _, n := range c.Nodes() {
		fmt.Fprintf(stderr, "bench: node %s pid %d on %s, data %s\n", n.ID(), n.PID(), n.URL(), n.DataDir())
	}
	if o.start == 1 {
		n := c.Nodes()[0]
		o.pid, o.dataDir = n.PID(), n.DataDir() // for rss
	}
	return func() {
		for _, n := range c.Running() {
			if _, _, err := n.Terminate(15 * time.Second); err != nil {
				fmt.Fprintln(stderr, "bench:", err)
			}
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
		}
		if o.faulty != nil {
			o.faulty.Stop() // unmounts the disks, removes the namespaces
		}
		removeWork()
	}, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// warnLine is a WARN or ERROR line of a node's log.
var warnLine = regexp.MustCompile(`level=(WARN|ERROR)`)

// checkNodes reports whether every node bench started still runs; it
// prints the end of the log of one that does not, and the first WARN and
// ERROR lines of every node's log.
func checkNodes(c *nodeproc.Cluster, stderr io.Writer) bool {
	ok := true
	for _, n := range c.Nodes() {
		if !n.Running() {
			fmt.Fprintf(stderr, "bench: node %s is not running after the run (%v); last log lines:\n%s", n.ID(), n.ExitErr(), n.Tail(20))
			ok = false
		}
		var first []string
		count := 0
		f, err := os.Open(n.LogPath())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if warnLine.Match(sc.Bytes()) {
				if count++; count <= 5 {
					first = append(first, sc.Text())
				}
			}
		}
		f.Close()
		if count > 0 {
			fmt.Fprintf(stderr, "bench: node %s logged %d WARN/ERROR lines; first ones:\n%s\n", n.ID(), count, strings.Join(first, "\n"))
		}
	}
	return ok
}

// leaderURL is the URL, among urls, of the node whose /health says it
// leads (waiting up to 15 s for one).
func leaderURL(ctx context.Context, urls []string) (string, error) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, u := range urls {
			var h struct {
				Raft struct {
					Role string `json:"role"`
				} `json:"raft"`
			}
			if getJSON(ctx, u+"/health", &h) == nil && h.Raft.Role == "leader" {
				return u, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("no node of %v says it leads", urls)
}

// getJSON decodes the JSON answer of a GET (any status).
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
