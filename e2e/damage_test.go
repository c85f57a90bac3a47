package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/internal/testfiles"
)

// A data dir of the format before checksums (testdata/README.md) starts on
// today's binary: its index files are rewritten with checksums, every
// message it held reads back as written, and FORMAT names the new formats
// (so the older binary refuses the dir from now on). Then, from outside as
// an operator would meet it: a bit flipped in a stopped node's message file
// is found on the first read, the pop answers an error that says so and
// never the damaged bytes, /health answers 503 "damaged" naming the file,
// the damage counter moves, and the intact queue is still served.
func TestDamagedMessageFilesAreFoundNeverServed(t *testing.T) {
	data := testfiles.UntarData(t, filepath.Join("testdata", "datadir-format3.tgz"))
	n := startNode(t, nodeOpts{DataDir: data})
	a := n.api(t)

	p := a.pop("/api/v1/pop/queue/legacy", url.Values{"batch": {"10"}, "wait": {"false"}})
	if p == nil || len(p.Messages) != 3 {
		t.Fatalf("legacy after the migration: %+v, want its 3 messages", p)
	}
	want := map[string]string{"l-1": `{"n":1,"note":"written by format 3"}`, "l-2": `{"n":2}`, "l-3": `{"n":3}`}
	for _, m := range p.Messages {
		if got := compactJSON(t, m.Data); got != want[m.TransactionID] {
			t.Errorf("%s: data %s, want %s", m.TransactionID, got, want[m.TransactionID])
		}
	}
	a.ackAll(p, nil)
	format, _ := os.ReadFile(filepath.Join(data, "FORMAT"))
	if strings.TrimSpace(string(format)) != fmt.Sprintf(`{"state":%d,"log":%d,"raftLog":"wal"}`, command.StateFormat, command.LogFormat) {
		t.Fatalf("FORMAT after the migration: %s", format)
	}
	if old, _ := filepath.Glob(filepath.Join(data, "messages", "*", "*.idx")); len(old) != 0 {
		t.Fatalf("unmigrated index files: %v", old)
	}
	if _, code := health(t, n); code != http.StatusOK {
		t.Fatalf("/health of the migrated node: %d", code)
	}

	// Stop it and flip one bit of o-2's payload in the orders segment.
	n.sigterm(10 * time.Second)
	seg := orderSegment(t, data)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.LastIndex(string(b), `"order":2`)
	if at < 0 {
		t.Fatalf("o-2's payload is not in %s", seg)
	}
	b[at+len(`"order":`)] ^= 0x01 // '2' becomes '3'
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	startAnswering(t, n) // the scrub may find the damage before /health is ever 200

	r := a.must("GET", "/api/v1/pop/queue/orders?batch=10&wait=false", nil)
	if r.Status < 500 || !strings.Contains(string(r.Body), "damaged") {
		t.Fatalf("pop of a damaged message: %s, want a 5xx that says damaged", r)
	}
	if strings.Contains(string(r.Body), `"order":3`) {
		t.Fatalf("the damaged bytes were served: %s", r)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(r.Body, &e) != nil || e.Error == "" {
		t.Fatalf("the refusal is not {\"error\": ...}: %s", r)
	}
	h, code := health(t, n)
	if code != http.StatusServiceUnavailable || h.Status != "damaged" || h.Raft.Damage == nil ||
		h.Raft.Damage.Where != "message_files" || !strings.Contains(h.Raft.Damage.Reason, filepath.Base(seg)) {
		t.Fatalf("/health of a damaged node: %d %+v", code, h)
	}
	metrics := a.must("GET", "/metrics/prometheus", nil)
	if !strings.Contains(string(metrics.Body), `queen_damage_found_total{where="message_files"}`) ||
		strings.Contains(string(metrics.Body), `queen_damage_found_total{where="message_files"} 0`) {
		t.Fatalf("the damage counter did not move:\n%s", grepLines(string(metrics.Body), "queen_damage_found_total"))
	}
	if n.logCount("damaged data found") == 0 {
		t.Fatal("the node did not log the damage")
	}
	// The intact queue is still served.
	a.push(pushItem{Queue: "legacy", TransactionID: "l-4", Payload: map[string]int{"n": 4}})
	if p := a.pop("/api/v1/pop/queue/legacy", url.Values{"batch": {"10"}, "wait": {"false"}}); p == nil ||
		len(p.Messages) != 1 || p.Messages[0].TransactionID != "l-4" {
		t.Fatalf("an intact queue on the damaged node: %+v", p)
	}
}

// startAnswering starts n again on its data dir and waits until /health
// answers at all (a damaged node answers 503) and a leader is elected.
func startAnswering(t *testing.T, n *node) {
	t.Helper()
	n.launch()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := n.send(2*time.Second, "GET", "/health", nil, nil); err == nil {
			var h struct {
				Raft struct {
					Leader bool `json:"leader"`
				} `json:"raft"`
			}
			if json.Unmarshal(r.Body, &h) == nil && h.Raft.Leader {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not answer /health with a leader in 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type healthAnswer struct {
	Status string `json:"status"`
	Raft   struct {
		Damage *struct {
			Where  string `json:"where"`
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"damage"`
	} `json:"raft"`
}

func health(t *testing.T, n *node) (healthAnswer, int) {
	t.Helper()
	r, err := n.send(5*time.Second, "GET", "/health", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h healthAnswer
	if err := json.Unmarshal(r.Body, &h); err != nil {
		t.Fatalf("/health: %v: %s", err, r.Body)
	}
	return h, r.Status
}

// orderSegment is the segment file that holds o-2's record.
func orderSegment(t *testing.T, data string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(data, "messages", "*", "*.log"))
	for _, p := range logs {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), `"order":2`) {
			return p
		}
	}
	t.Fatalf("no segment holds o-2 among %v", logs)
	return ""
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The background scrub finds a damaged record nobody reads: a bit flipped
// in a stopped node's message file shows on /health as soon as the first
// pass after the start reaches it, with the scrub's counters on /metrics.
func TestTheScrubFindsDamageNobodyReads(t *testing.T) {
	n := startNode(t, nodeOpts{Extra: []string{"--scrub-interval", "1s"}})
	a := n.api(t)
	for i := range 20 {
		a.push(pushItem{Queue: "cold", TransactionID: fmt.Sprint("c-", i), Payload: map[string]int{"cold": i}})
	}
	n.sigterm(10 * time.Second)
	logs, _ := filepath.Glob(filepath.Join(n.DataDir(), "messages", "*", "*.log"))
	if len(logs) != 1 {
		t.Fatalf("segment files: %v", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(logs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	startAnswering(t, n)
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, code := health(t, n)
		if h.Status == "damaged" {
			if code != http.StatusServiceUnavailable || h.Raft.Damage.Where != "message_files" {
				t.Fatalf("/health: %d %+v", code, h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scrub did not find the damage in 20s: /health %d %+v", code, h)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := string(a.must("GET", "/metrics/prometheus", nil).Body)
	for _, name := range []string{"queen_scrub_damaged_total", "queen_scrub_records_total", "queen_scrub_passes_total"} {
		if metricValue(m, name) < 1 {
			t.Fatalf("%s is not at least 1:\n%s", name, grepLines(m, "queen_scrub"))
		}
	}
}

// metricValue is the value of the unlabelled metric name in a Prometheus
// text exposition (-1 when it is absent).
func metricValue(exposition, name string) float64 {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// A leader that finds its own files damaged hands its leadership to a
// replica whose files are intact, then rebuilds itself from the new leader
// (cluster/resync.go): here the scrub finds a bit flipped under the
// running leader, which steps down, restarts, is made a non-voter, catches
// up and is promoted back; its damaged files are kept aside, and its state
// is the others' again. The new leader served the message as pushed.
func TestADamagedLeaderStepsDownAndIsRebuilt(t *testing.T) {
	c := startCluster(t, nodeOpts{Extra: []string{"--scrub-interval", "1s"}})
	l := c.leader(30 * time.Second)
	a := l.api(t)
	a.push(pushItem{Queue: "held", TransactionID: "h-1", Payload: map[string]string{"kept": "intact"}})
	var seg string
	deadline := time.Now().Add(10 * time.Second)
	for seg == "" && time.Now().Before(deadline) { // the leader applied it
		logs, _ := filepath.Glob(filepath.Join(l.DataDir(), "messages", "*", "*.log"))
		if len(logs) == 1 {
			seg = logs[0]
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if seg == "" {
		t.Fatal("the leader holds no segment file")
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, 20)
	b[0] ^= 0x02
	f.WriteAt(b, 20) // in place: the running node's open handle sees it
	f.Close()
	since := time.Now()
	newLeader, took, err := c.awaitNewLeader(l.ID(), since, 30*time.Second)
	if err != nil {
		t.Fatalf("the damaged leader %s kept its leadership: %v", l.ID(), err)
	}
	t.Logf("the damaged leader %s handed over to %s in %v", l.ID(), newLeader, took)
	for _, n := range c.others(l) {
		if n.ID() != newLeader {
			continue
		}
		p := n.api(t).pop("/api/v1/pop/queue/held", url.Values{"wait": {"false"}})
		if p == nil || len(p.Messages) != 1 || compactJSON(t, p.Messages[0].Data) != `{"kept":"intact"}` {
			t.Fatalf("the new leader served %+v", p)
		}
	}
	awaitRebuilt(t, c, l, 60*time.Second)
	t.Logf("%s rebuilt from the leader %v after the damage was found", l.ID(), time.Since(since).Round(time.Millisecond))
	if kept, _ := filepath.Glob(filepath.Join(l.DataDir(), "damaged", "*", "messages")); len(kept) != 1 {
		t.Fatalf("the damaged message files were not kept aside: %v", kept)
	}
}

// awaitRebuilt waits until n, which found its files damaged, answers
// /health healthy with no resync in progress and no RESYNC marker left, is
// a voter again, and holds the same state as every other node.
func awaitRebuilt(t *testing.T, c *testCluster, n *node, timeout time.Duration) {
	t.Helper()
	ok, detail := pollUntil(timeout, 200*time.Millisecond, func() (bool, string) {
		r, err := n.send(2*time.Second, "GET", "/health", nil, nil)
		if err != nil {
			return false, err.Error()
		}
		var h struct {
			Status string `json:"status"`
			Raft   struct {
				Resync any `json:"resync"`
			} `json:"raft"`
		}
		if json.Unmarshal(r.Body, &h) != nil || h.Status != "healthy" || h.Raft.Resync != nil {
			return false, string(r.Body)
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("%s was not rebuilt within %v: /health %s", n.ID(), timeout, detail)
	}
	if _, err := os.Stat(filepath.Join(n.DataDir(), "RESYNC")); !os.IsNotExist(err) {
		t.Fatalf("the RESYNC marker is still there: %v", err)
	}
	if err := c.WaitVoters(context.Background(), timeout, c.Nodes()...); err != nil {
		t.Fatal(err)
	}
	awaitSameState(t, c.others(), 30*time.Second)
}

// awaitSameState waits until every node of nodes reports the same state
// hash at the same applied index.
func awaitSameState(t *testing.T, nodes []*node, timeout time.Duration) {
	t.Helper()
	ok, detail := pollUntil(timeout, 200*time.Millisecond, func() (bool, string) {
		var hashes []string
		for _, n := range nodes {
			var sh map[string]any
			if err := n.getJSON("/api/v1/system/state-hash", 5*time.Second, &sh); err != nil {
				return false, err.Error()
			}
			hashes = append(hashes, fmt.Sprint(sh["appliedIndex"], " ", sh["hash"]))
		}
		for _, h := range hashes {
			if h != hashes[0] {
				return false, fmt.Sprint(hashes)
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("the nodes' states disagree: %s", detail)
	}
}
