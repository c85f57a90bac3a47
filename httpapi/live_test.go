package httpapi_test

// Tests against a real in-process node: real Raft, real bbolt files, a real
// HTTP server. They walk the spec's flows as a client sees them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/request"
)

type live struct {
	t    *testing.T
	url  string
	node *cluster.Node
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startLive(t *testing.T) *live { return startLiveWith(t, httpapi.Config{}) }

func startLiveWith(t *testing.T, cfg httpapi.Config) *live {
	t.Helper()
	var reg *prometheus.Registry
	var n *cluster.Node
	var err error
	for attempt := 0; attempt < 5; attempt++ { // a free port can be taken between freePort and the bind
		reg = prometheus.NewRegistry()
		n, err = cluster.Start(cluster.Config{NodeID: "live", DataDir: t.TempDir(), RaftAddr: freePort(t),
			BootstrapExpect: 1, Registry: reg, SweepInterval: 50 * time.Millisecond,
			Tuning: raftlog.Tuning{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond}})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend, cfg.Registry = n, reg
	srv := httptest.NewServer(httpapi.New(cfg))
	t.Cleanup(func() { srv.Close(); n.Shutdown() })
	l := &live{t: t, url: srv.URL, node: n}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := l.do("POST", "/api/v1/kv", `{"operations":[{"op":"get","ns":"probe","key":"p"}]}`)
		if cfg.Auth != nil { // the probe has no token: readiness is /health
			code, _ = l.do("GET", "/health", "")
		}
		if code == 200 {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not ready: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *live) do(method, path, body string) (int, []byte) {
	l.t.Helper()
	code, b, _ := l.doH(method, path, body, nil)
	return code, b
}

func (l *live) doH(method, path, body string, hdr map[string]string) (int, []byte, http.Header) {
	l.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, l.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (l *live) json(method, path, body string, want int, out any) {
	l.t.Helper()
	code, b := l.do(method, path, body)
	if code != want {
		l.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			l.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type popMsg struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	PartitionID   string          `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	RetryCount    int             `json:"retryCount"`
	CreatedAt     string          `json:"createdAt"`
}

type popResp struct {
	Success  bool     `json:"success"`
	LeaseID  string   `json:"leaseId"`
	Messages []popMsg `json:"messages"`
}

func (l *live) pop(path string) *popResp {
	l.t.Helper()
	code, b := l.do("GET", path, "")
	switch code {
	case 204:
		if len(b) != 0 {
			l.t.Fatalf("204 with a body: %q", b)
		}
		return &popResp{}
	case 200:
		var p popResp
		if err := json.Unmarshal(b, &p); err != nil {
			l.t.Fatal(err)
		}
		return &p
	}
	l.t.Fatalf("pop: %d %s", code, b)
	return nil
}

func ackBody(m popMsg, status string) string {
	b, _ := json.Marshal(map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": m.LeaseID, "consumerGroup": m.ConsumerGroup, "status": status})
	return string(b)
}

func TestLivePushPopAck(t *testing.T) {
	l := startLive(t)
	var pushed []map[string]any
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"orders","transactionId":"o1","payload":{"n":1}},
		{"queue":"orders","transactionId":"o2","payload":null},{"queue":"orders","transactionId":"o1"}]}`, 201, &pushed)
	if pushed[0]["status"] != "queued" || pushed[2]["status"] != "duplicate" || pushed[2]["message_id"] != pushed[0]["message_id"] {
		t.Fatalf("push results: %v", pushed)
	}
	p := l.pop("/api/v1/pop/queue/orders?batch=10")
	if len(p.Messages) != 2 || string(p.Messages[0].Data) != `{"n":1}` || string(p.Messages[1].Data) != "null" {
		t.Fatalf("pop: %+v", p)
	}
	if !strings.HasSuffix(p.Messages[0].CreatedAt, "Z") || len(p.Messages[0].CreatedAt) != len("2026-04-26T10:59:28.267966Z") {
		t.Fatalf("createdAt format: %s", p.Messages[0].CreatedAt)
	}
	var acks []map[string]any
	l.json("POST", "/api/v1/ack/batch", fmt.Sprintf(`{"acknowledgments":[%s,%s]}`,
		ackBody(p.Messages[0], "completed"), ackBody(p.Messages[1], "completed")), 200, &acks)
	if len(acks) != 2 || acks[1]["leaseReleased"] != true {
		t.Fatalf("acks: %v", acks)
	}
	if got := l.pop("/api/v1/pop/queue/orders"); len(got.Messages) != 0 {
		t.Fatalf("drained queue gave %v", got)
	}
	// Empty items: 201 [].
	code, b := l.do("POST", "/api/v1/push", `{"items":[]}`)
	if code != 201 || string(bytes.TrimSpace(b)) != "[]" {
		t.Fatalf("empty push: %d %s", code, b)
	}
}

// waitParked waits until count long-poll pops stand parked on the node:
// from then on a change they may take wakes them.
func (l *live) waitParked(count int) {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.node.ParkedPops() != count {
		if time.Now().After(deadline) {
			l.t.Fatalf("%d pops parked after 10 s, want %d", l.node.ParkedPops(), count)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A parked pop is woken by the push, not by its timeout: with a 10 s wait it
// answers the message long before the 10 s are up (half of them is a bound
// no wake-up could miss, and a pop that sleeps its timeout out cannot meet).
// An empty long poll answers 204 after its whole timeout.
func TestLiveLongPollWakesOnPush(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"lp"}`, 200, nil)
	const wait = 10 * time.Second
	type answer struct {
		code int
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := http.Get(l.url + fmt.Sprintf("/api/v1/pop/queue/lp?wait=true&timeout=%d", wait.Milliseconds()))
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, b, err}
	}()
	l.waitParked(1)
	pushed := time.Now()
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"lp","payload":1}]}`, 201, nil)
	select {
	case a := <-done:
		var got popResp
		if a.err != nil || a.code != 200 || json.Unmarshal(a.body, &got) != nil || len(got.Messages) != 1 {
			t.Fatalf("long poll woken by a push: %d %s %v", a.code, a.body, a.err)
		}
		t.Logf("the parked pop answered %v after the push was sent", time.Since(pushed))
	case <-time.After(wait / 2):
		t.Fatalf("a pop parked with a %v wait had not answered %v after a push it could take", wait, wait/2)
	}
	// A pop without wait answers at once; a wait times out with 204.
	const short = 500 * time.Millisecond
	start := time.Now()
	if p := l.pop(fmt.Sprintf("/api/v1/pop/queue/lp?wait=true&timeout=%d", short.Milliseconds())); len(p.Messages) != 0 || time.Since(start) < short {
		t.Fatalf("timed-out long poll: %v after %v, want nothing after its %v timeout", p, time.Since(start), short)
	}
}

// A failed message comes back after its retry delay: a long poll waiting for
// it is woken when the delay ends, not before and not at its own 10 s
// timeout.
func TestLiveRetryAfterFailedAckComesBackAfterTheDelay(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"r","options":{"retryLimit":1,"retryDelay":300}}`, 200, nil)
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"r","transactionId":"x","payload":{}}]}`, 201, nil)
	p := l.pop("/api/v1/pop/queue/r")
	start := time.Now() // before the failure: the delay runs from its entry
	l.json("POST", "/api/v1/ack", ackBody(p.Messages[0], "failed"), 200, nil)
	const wait = 10 * time.Second
	p2 := l.pop(fmt.Sprintf("/api/v1/pop/queue/r?wait=true&timeout=%d", wait.Milliseconds()))
	took := time.Since(start)
	if len(p2.Messages) != 1 || p2.Messages[0].RetryCount != 1 || took < 250*time.Millisecond {
		t.Fatalf("redelivery: %+v after %v", p2, took)
	}
	if took >= wait/2 {
		t.Fatalf("the redelivery due 300 ms after the failure reached a pop parked for %v only after %v: the delay's end did not wake it", wait, took)
	}
	// The second failure exhausts retryLimit 1: dead letter.
	var acks []map[string]any
	l.json("POST", "/api/v1/ack", strings.Replace(ackBody(p2.Messages[0], "failed"), `"status"`, `"error":"card declined","status"`, 1), 200, &acks)
	if acks[0]["dlq"] != true {
		t.Fatalf("ack: %v", acks)
	}
	var dlq struct {
		Total    int              `json:"total"`
		Messages []map[string]any `json:"messages"`
	}
	l.json("GET", "/api/v1/dlq?queue=r", "", 200, &dlq)
	if dlq.Total != 1 || dlq.Messages[0]["errorMessage"] != "card declined" {
		t.Fatalf("dlq: %+v", dlq)
	}
}

func TestLiveTransactionMarkerAndAckAreOneEntry(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"pay","options":{"leaseTime":1}}`, 200, nil)
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"pay","transactionId":"o1","payload":{}}]}`, 201, nil)
	a := l.pop("/api/v1/pop/queue/pay")
	time.Sleep(1100 * time.Millisecond) // A's lease runs out while it charges
	b := l.pop("/api/v1/pop/queue/pay")
	commit := func(m popMsg) map[string]any {
		var out map[string]any
		l.json("POST", "/api/v1/transaction", fmt.Sprintf(`{"operations":[{"type":"ack","transactionId":%q,"partitionId":%q,"leaseId":%q}],
			"kv":[{"op":"putIfAbsent","ns":"pay","key":"charge:o1","value":{"by":%q},"ttlSeconds":60,"required":true}]}`,
			m.TransactionID, m.PartitionID, m.LeaseID, m.LeaseID), 200, &out)
		return out
	}
	if r := commit(b.Messages[0]); r["success"] != true {
		t.Fatalf("B's commit: %v", r)
	}
	if r := commit(a.Messages[0]); r["success"] != false || r["reason"] != "rejected_ack" {
		t.Fatalf("A's late commit: %v", r)
	}
	var kv map[string]any
	l.json("GET", "/api/v1/kv/pay/charge:o1", "", 200, &kv)
	if v := kv["value"].(map[string]any); v["by"] != b.Messages[0].LeaseID {
		t.Fatalf("marker written by %v, want B", v["by"])
	}
}

func TestLiveBadInputChangesNothing(t *testing.T) {
	l := startLive(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/push", `{"items":[{"queue":"bad","payload":1},{"queue":5}]}`},
		{"POST", "/api/v1/push", `{"items":[{"queue":"bad","traceId":"not-a-uuid"}]}`},
		{"POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"bad"}]},{"type":"kv"}]}`},
		{"POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"bad","key":"k","value":1}]}`},
	} {
		code, b := l.do(c.method, c.path, c.body)
		if code != 400 || !bytes.Contains(b, []byte(`"error"`)) {
			t.Fatalf("%s: %d %s", c.body, code, b)
		}
	}
	code, _ := l.do("GET", "/api/v1/resources/queues/bad", "")
	if code != 404 {
		t.Fatalf("a refused request created the queue: %d", code)
	}
}

func TestLiveIdempotencyKey(t *testing.T) {
	l := startLive(t)
	key := map[string]string{"Idempotency-Key": "pay-123"}
	// No transactionId: without the key a retry would store a second message.
	body := `{"items":[{"queue":"idem","payload":{"amount":100}}]}`
	c1, b1, h1 := l.doH("POST", "/api/v1/push", body, key)
	c2, b2, h2 := l.doH("POST", "/api/v1/push", body, key)
	if c1 != 201 || c2 != 201 || !bytes.Equal(b1, b2) {
		t.Fatalf("retry answered %d %s, first %d %s", c2, b2, c1, b1)
	}
	if h1.Get("Idempotent-Replayed") != "" || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay header: first %q, retry %q", h1.Get("Idempotent-Replayed"), h2.Get("Idempotent-Replayed"))
	}
	if p := l.pop("/api/v1/pop/queue/idem?batch=10"); len(p.Messages) != 1 {
		t.Fatalf("%d messages stored, want 1", len(p.Messages))
	}
	// The same key with another body is a client mistake.
	if c, b, _ := l.doH("POST", "/api/v1/push", `{"items":[{"queue":"idem","payload":{"amount":999}}]}`, key); c != 422 {
		t.Fatalf("reused key: %d %s", c, b)
	}
	// A definitive 4xx is stored too.
	bad := map[string]string{"Idempotency-Key": "bad-1"}
	c3, b3, _ := l.doH("POST", "/api/v1/push", `{"items":5}`, bad)
	c4, b4, h4 := l.doH("POST", "/api/v1/push", `{"items":5}`, bad)
	if c3 != 400 || c4 != 400 || !bytes.Equal(b3, b4) || h4.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("stored 4xx: %d %s then %d %s %v", c3, b3, c4, b4, h4)
	}
	// Transactions and KV writes take the header too.
	txn := `{"operations":[{"type":"push","items":[{"queue":"idem2","payload":1}]}],"kv":[{"op":"incr","ns":"idem","key":"n","delta":1,"forever":true}]}`
	tk := map[string]string{"Idempotency-Key": "txn-1"}
	l.doH("POST", "/api/v1/transaction", txn, tk)
	if c, b, h := l.doH("POST", "/api/v1/transaction", txn, tk); c != 200 || h.Get("Idempotent-Replayed") != "true" || !bytes.Contains(b, []byte(`"success":true`)) {
		t.Fatalf("txn replay: %d %s", c, b)
	}
	kk := map[string]string{"Idempotency-Key": "kv-1"}
	incr := `{"operations":[{"op":"incr","ns":"idem","key":"n","delta":1,"forever":true}]}`
	l.doH("POST", "/api/v1/kv", incr, kk)
	l.doH("POST", "/api/v1/kv", incr, kk)
	var got map[string]any
	l.json("GET", "/api/v1/kv/idem/n", "", 200, &got)
	if got["value"] != float64(2) {
		t.Fatalf("counter = %v, want 2 (one txn incr + one kv incr, retries replayed)", got["value"])
	}
	if c, _, _ := l.doH("POST", "/api/v1/push", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}); c != 400 {
		t.Fatalf("oversized key: %d", c)
	}
}

func TestLiveKVSwitchAndReadRate(t *testing.T) {
	l := startLiveWith(t, httpapi.Config{Rules: request.New(request.Options{KVReadRate: 1})})
	code, _, hdr := l.doH("GET", "/api/v1/kv/ns/a", "", nil)
	for i := 0; i < 5 && code == 200; i++ {
		code, _, hdr = l.doH("GET", "/api/v1/kv/ns/a", "", nil)
	}
	if code != 429 || hdr.Get("Retry-After") == "" {
		t.Fatalf("read rate: %d %v", code, hdr)
	}
	var sw map[string]any
	l.json("POST", "/api/v1/system/kv-timers", `{"kv":false}`, 200, &sw)
	if sw["kvEnabled"] != false {
		t.Fatalf("switches: %v", sw)
	}
	if c, b := l.do("POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"a","key":"k","value":1,"forever":true}]}`); c != 503 || !bytes.Contains(b, []byte("kv_disabled")) {
		t.Fatalf("kv write while off: %d %s", c, b)
	}
	if c, b := l.do("POST", "/api/v1/transaction", `{"kv":[{"op":"put","ns":"a","key":"k","value":1,"forever":true}]}`); c != 403 {
		t.Fatalf("transaction with kv while off: %d %s", c, b)
	}
	if c, _ := l.do("POST", "/api/v1/system/kv-timers", `{}`); c != 400 {
		t.Fatalf("empty switch body: %d", c)
	}
	l.json("POST", "/api/v1/system/kv-timers", `{"kv":true}`, 200, &sw)
	l.json("GET", "/api/v1/system/kv-timers", "", 200, &sw)
	if sw["kvEnabled"] != true {
		t.Fatalf("switches: %v", sw)
	}
}

func TestLiveWrongMethodIsAJSON404(t *testing.T) {
	l := startLive(t)
	code, b := l.do("GET", "/api/v1/push", "")
	if code != 404 || !bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("GET /api/v1/push: %d %s", code, b)
	}
}

// With the defaults (retryLimit 3, retryDelay 1000 ms) a consumer that
// long-polls 2 s and stops at its first empty answer sees a failing message
// all four times and leaves it in the DLQ: each failure waits about
// retryDelay, not retryDelay doubled.
func TestLiveDefaultRetriesReachTheDLQWithinAPatientConsumer(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"d"}`, 200, nil)
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"d","transactionId":"x","payload":{}}]}`, 201, nil)
	deliveries := 0
	for {
		p := l.pop("/api/v1/pop/queue/d?wait=true&timeout=2000")
		if len(p.Messages) == 0 {
			break
		}
		deliveries++
		l.json("POST", "/api/v1/ack", ackBody(p.Messages[0], "failed"), 200, nil)
	}
	var dlq struct {
		Total int `json:"total"`
	}
	l.json("GET", "/api/v1/dlq?queue=d", "", 200, &dlq)
	if deliveries != 4 || dlq.Total != 1 {
		t.Fatalf("%d deliveries, %d in the DLQ; want 4 and 1", deliveries, dlq.Total)
	}
}
