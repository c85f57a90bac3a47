package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/httpapi"
)

const testSecret = "a-test-secret-of-enough-length-32b"

func token(t *testing.T, sub string, extra map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(testSecret)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startLiveWithJWT starts a live node with JWT on: c, with HS256 and
// testSecret.
func startLiveWithJWT(t *testing.T, c auth.Config) *live {
	t.Helper()
	c.Enabled, c.Secret = true, testSecret
	v, err := auth.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return startLiveWith(t, httpapi.Config{Auth: v})
}

// With JWT on: the spec's 401 and 403 bodies, the route levels of spec §3,
// the producer-only write-only role, producerSub from the token, and the
// public routes.
func TestLiveJWTLevelsAndRoles(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	as := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	ro := as(token(t, "dashboard", map[string]any{"role": "read-only"}))
	wo := as(token(t, "checkout", map[string]any{"role": "write-only"}))
	rw := as(token(t, "charger", map[string]any{"roles": []string{"read-write"}}))
	admin := as(token(t, "ops", map[string]any{"role": "admin"}))
	expired := as(token(t, "late", map[string]any{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()}))
	call := func(hdr map[string]string, method, path, body string) (int, string) {
		t.Helper()
		code, b, _ := l.doH(method, path, body, hdr)
		return code, strings.TrimSpace(string(b))
	}
	want := func(what string, code int, body string, wantCode int, wantBody string) {
		t.Helper()
		if code != wantCode || (wantBody != "" && body != wantBody) {
			t.Fatalf("%s: %d %s, want %d %s", what, code, body, wantCode, wantBody)
		}
	}
	push := `{"items":[{"queue":"jq","transactionId":"j1","payload":1,"producerSub":"someone-else"}]}`
	c, b := call(nil, "POST", "/api/v1/push", push)
	want("push without a token", c, b, 401, `{"error":"Authentication required"}`)
	c, b = call(expired, "POST", "/api/v1/push", push)
	want("expired", c, b, 401, `{"error":"Token has expired"}`)
	c, b = call(map[string]string{"Authorization": "Bearer " + token(t, "x", nil) + "x"}, "POST", "/api/v1/push", push)
	want("bad signature", c, b, 401, `{"error":"Invalid token signature"}`)
	c, b = call(ro, "POST", "/api/v1/push", push)
	want("read-only push", c, b, 403, `{"error":"Insufficient permissions"}`)
	c, b = call(ro, "GET", "/api/v1/resources/queues", "")
	want("read-only lists queues", c, b, 200, "")
	if strings.Contains(b, "jq") {
		t.Fatal("a refused push created its queue")
	}
	c, b = call(wo, "POST", "/api/v1/push", push)
	want("write-only push", c, b, 201, "")
	for _, p := range []struct{ method, path, body string }{
		{"GET", "/api/v1/pop/queue/jq", ""},
		{"POST", "/api/v1/ack", `{"transactionId":"j1","partitionId":"x"}`},
		{"GET", "/api/v1/resources/queues", ""},
		{"POST", "/api/v1/transaction", `{"operations":[]}`},
		{"POST", "/api/v1/timers", `{"operations":[{"op":"cancel","queue":"jq","timerKey":"k"}]}`},
	} {
		c, b = call(wo, p.method, p.path, p.body)
		want("write-only "+p.method+" "+p.path, c, b, 403, `{"error":"Insufficient permissions"}`)
	}
	c, b = call(wo, "POST", "/api/v1/timers", `{"operations":[{"op":"schedule","queue":"jq","timerKey":"k","delayMs":60000,"txn":"t1","payload":"MQ=="}]}`)
	want("write-only schedules a timer", c, b, 200, "")
	c, b = call(rw, "GET", "/api/v1/timers/jq/k", "")
	if c != 200 || !strings.Contains(b, `"producerSub":"checkout"`) {
		t.Fatalf("the timer's producerSub: %d %s", c, b)
	}
	// A transaction's timers are stamped too (issue 21: they were not).
	c, b = call(rw, "POST", "/api/v1/transaction", `{"operations":[],"timers":[{"op":"schedule","queue":"jq","timerKey":"tx","delayMs":60000,"txn":"t2","payload":"MQ=="}]}`)
	want("read-write schedules a timer in a transaction", c, b, 200, "")
	c, b = call(rw, "GET", "/api/v1/timers/jq/tx", "")
	if c != 200 || !strings.Contains(b, `"producerSub":"charger"`) {
		t.Fatalf("the transaction timer's producerSub: %d %s", c, b)
	}
	c, b = call(rw, "GET", "/api/v1/pop/queue/jq", "")
	want("read-write pop", c, b, 200, "")
	var popped struct {
		Messages []struct {
			ProducerSub string `json:"producerSub"`
		} `json:"messages"`
	}
	json.Unmarshal([]byte(b), &popped)
	if len(popped.Messages) != 1 || popped.Messages[0].ProducerSub != "checkout" {
		t.Fatalf("producerSub: %s", b)
	}
	c, b = call(rw, "DELETE", "/api/v1/resources/queues/jq", "")
	want("read-write delete", c, b, 403, `{"error":"Insufficient permissions"}`)
	c, b = call(rw, "POST", "/api/v1/system/maintenance", `{"enabled":true}`)
	want("read-write maintenance", c, b, 403, `{"error":"Insufficient permissions"}`)
	c, b = call(admin, "DELETE", "/api/v1/resources/queues/jq", "")
	want("admin delete", c, b, 200, "")
	for _, p := range []string{"/health", "/metrics", "/metrics/prometheus"} {
		if c, _ := call(nil, "GET", p, ""); c != 200 {
			t.Fatalf("%s without a token: %d", p, c)
		}
	}
	c, b = call(nil, "GET", "/api/v1/nothing-here", "")
	want("an unknown route is not a skip path", c, b, 401, "")
}

// With JWT on an Idempotency-Key belongs to its caller: the same key from
// two subs is two requests, and neither gets the other's stored answer.
func TestLiveIdempotencyKeysAreScopedToTheCaller(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	push := func(sub, txn string) (int, string) {
		h := map[string]string{"Authorization": "Bearer " + token(t, sub, map[string]any{"role": "read-write"}), "Idempotency-Key": "k-1"}
		code, b, _ := l.doH("POST", "/api/v1/push", `{"items":[{"queue":"iq","transactionId":"`+txn+`"}]}`, h)
		return code, string(b)
	}
	c1, b1 := push("alice", "a1")
	c2, b2 := push("bob", "b1") // the same key, another caller, another body
	if c1 != 201 || c2 != 201 || !strings.Contains(b1, `"a1"`) || !strings.Contains(b2, `"b1"`) {
		t.Fatalf("alice %d %s; bob %d %s", c1, b1, c2, b2)
	}
	// alice's retry is a replay of her own answer.
	if c, b := push("alice", "a1"); c != 201 || b != b1 {
		t.Fatalf("alice's retry: %d %s", c, b)
	}
}

// Admin and destructive actions are in the audit trail with the token's
// sub, readable by an admin.
func TestLiveAuditTrail(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	as := func(sub, role string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token(t, sub, map[string]any{"role": role})}
	}
	ops, worker := as("alice-ops", "admin"), as("bob-worker", "read-write")
	for _, c := range []struct {
		hdr          map[string]string
		method, path string
		body         string
		want         int
	}{
		{worker, "POST", "/api/v1/push", `{"items":[{"queue":"aq","payload":1}]}`, 201},
		{worker, "POST", "/api/v1/consumer-groups/g/queues/aq/seek", `{"toEnd":true}`, 200},
		{ops, "POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`, 200},
		{ops, "DELETE", "/api/v1/resources/queues/aq", "", 200},
		{worker, "GET", "/api/v1/system/audit", "", 403},
	} {
		if code, b, _ := l.doH(c.method, c.path, c.body, c.hdr); code != c.want {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, b)
		}
	}
	var trail struct {
		Records []struct {
			Actor, Action, Detail string
		} `json:"records"`
	}
	code, b, _ := l.doH("GET", "/api/v1/system/audit", "", ops)
	if code != 200 || json.Unmarshal(b, &trail) != nil {
		t.Fatalf("audit: %d %s", code, b)
	}
	got := []string{}
	for _, r := range trail.Records {
		got = append(got, r.Actor+" "+r.Action)
	}
	want := "alice-ops delete_queue,alice-ops set_switches,bob-worker seek"
	if strings.Join(got, ",") != want {
		t.Fatalf("audit trail (newest first): %v, want %s\n%s", got, want, b)
	}
}

// A token's queues claim limits it beyond its role: the refunds service
// cannot pop, ack, push to or read a payments queue, or write its KV
// namespace (403, nothing written).
func TestLiveQueueScopes(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	as := func(sub string, queues []string) map[string]string {
		c := map[string]any{"role": "read-write"}
		if queues != nil {
			c["queues"] = queues
		}
		return map[string]string{"Authorization": "Bearer " + token(t, sub, c)}
	}
	refunds, payments := as("refunds", []string{"refunds."}), as("payments", []string{"payments."})
	call := func(hdr map[string]string, method, path, body string) (int, string) {
		code, b, _ := l.doH(method, path, body, hdr)
		return code, string(b)
	}
	if c, b := call(payments, "POST", "/api/v1/push", `{"items":[{"queue":"payments.orders","transactionId":"p1"}]}`); c != 201 {
		t.Fatalf("payments push: %d %s", c, b)
	}
	if c, b := call(refunds, "POST", "/api/v1/push", `{"items":[{"queue":"refunds.orders","transactionId":"r1"}]}`); c != 201 {
		t.Fatalf("refunds push: %d %s", c, b)
	}
	c, b := call(payments, "GET", "/api/v1/pop/queue/payments.orders", "")
	if c != 200 {
		t.Fatalf("payments pop: %d %s", c, b)
	}
	var p struct {
		Messages []popMsg `json:"messages"`
	}
	json.Unmarshal([]byte(b), &p)
	before, _, _ := l.node.StateHash()
	_, hashBefore, _ := l.node.StateHash()
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/pop/queue/payments.orders", ""},
		{"POST", "/api/v1/ack", ackBody(p.Messages[0], "completed")},
		{"POST", "/api/v1/push", `{"items":[{"queue":"payments.orders","transactionId":"x"}]}`},
		{"POST", "/api/v1/transaction", `{"operations":[{"type":"push","items":[{"queue":"payments.orders","payload":1}]}]}`},
		{"PUT", "/api/v1/kv/payments/charge:1", `{"value":1,"forever":true}`},
		{"GET", "/api/v1/kv/payments/charge:1", ""},
		{"GET", "/api/v1/resources/queues/payments.orders", ""},
		{"GET", "/api/v1/dlq", ""},
		{"GET", "/api/v1/pop?namespace=payments", ""},
	} {
		if c, b := call(refunds, r.method, r.path, r.body); c != 403 {
			t.Fatalf("refunds %s %s: %d %s, want 403", r.method, r.path, c, b)
		}
	}
	after, hashAfter, _ := l.node.StateHash()
	if after != before || hashAfter != hashBefore {
		t.Fatal("a refused call of a scoped token changed the state")
	}
	// Lists show a scoped token its own queues only.
	if c, b := call(refunds, "GET", "/api/v1/resources/queues", ""); c != 200 || strings.Contains(b, "payments.orders") || !strings.Contains(b, "refunds.orders") {
		t.Fatalf("refunds lists queues: %d %s", c, b)
	}
	if c, b := call(refunds, "GET", "/api/v1/consumer-groups", ""); c != 200 || strings.Contains(b, "payments.orders") {
		t.Fatalf("refunds lists groups: %d %s", c, b)
	}
	if c, b := call(payments, "GET", "/api/v1/consumer-groups", ""); c != 200 || !strings.Contains(b, "payments.orders") {
		t.Fatalf("payments lists groups: %d %s", c, b)
	}
	if c, b := call(refunds, "PUT", "/api/v1/kv/refunds.charges/r:1", `{"value":1,"forever":true}`); c != 200 {
		t.Fatalf("refunds writes its own namespace: %d %s", c, b)
	}
	var acks []map[string]any
	c, b = call(payments, "POST", "/api/v1/ack", ackBody(p.Messages[0], "completed"))
	json.Unmarshal([]byte(b), &acks)
	if c != 200 || len(acks) != 1 || acks[0]["success"] != true {
		t.Fatalf("payments acks its own: %d %s", c, b)
	}
}

// POST /api/v1/kv with reads only is read-only (spec §3); a write in it
// needs read-write, and a read-only token's write changes nothing.
func TestKVReadsAreReadOnlyAndWritesReadWrite(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	ro := map[string]string{"Authorization": "Bearer " + token(t, "dashboard", map[string]any{"role": "read-only"})}
	rw := map[string]string{"Authorization": "Bearer " + token(t, "charger", map[string]any{"role": "read-write"})}
	put := `[{"op":"put","ns":"m","key":"k","value":1,"forever":true}]`
	if code, b, _ := l.doH("POST", "/api/v1/kv", put, rw); code != 200 {
		t.Fatalf("read-write put: %d %s", code, b)
	}
	if code, b, _ := l.doH("POST", "/api/v1/kv", `[{"op":"get","ns":"m","key":"k"},{"op":"getPrefix","ns":"m","prefix":"k"}]`, ro); code != 200 || !strings.Contains(string(b), `"value":1`) {
		t.Fatalf("read-only reads: %d %s", code, b)
	}
	_, before, _ := l.node.StateHash()
	if code, b, _ := l.doH("POST", "/api/v1/kv", `[{"op":"get","ns":"m","key":"k"},{"op":"put","ns":"m","key":"k2","value":2,"forever":true}]`, ro); code != 403 {
		t.Fatalf("read-only write: %d %s, want 403", code, b)
	}
	if _, after, _ := l.node.StateHash(); after != before {
		t.Fatalf("a refused write moved the state: %s -> %s", before, after)
	}
}
