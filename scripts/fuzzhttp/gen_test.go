package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func testTokens(t *testing.T) *tokens {
	t.Helper()
	tok, err := newTokens("a-test-secret-of-enough-length-32b")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func testFuzzer(t *testing.T, seed uint64, tok *tokens) *fuzzer {
	t.Helper()
	return newFuzzer(Config{Seed: seed, MaxBody: 256 << 10, ReadSample: 8}, tok, "http://127.0.0.1:1", "fz1")
}

// Every route the API serves has a request shape, and every shape is a
// route: a new route fails here until the fuzzer knows it.
func TestEveryRouteHasAShape(t *testing.T) {
	routes, _ := routeTable()
	if len(routes) < 40 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	for _, p := range routes {
		if shapes[p] == nil {
			t.Errorf("route %s has no shape", p)
		}
	}
	for p := range shapes {
		if !slices.Contains(routes, p) {
			t.Errorf("shape %s is no route of the API", p)
		}
	}
	for _, w := range validWeights {
		if shapes[w.pattern] == nil {
			t.Errorf("valid request of %s has no shape", w.pattern)
		}
	}
}

// A shape written out reaches its own route (the parameters escaped as the
// mux reads them), and its body is JSON.
func TestShapesReachTheirRoute(t *testing.T) {
	f := testFuzzer(t, 1, testTokens(t))
	f.g.w.leases = []lease{{id: "l", partitionID: "p", queue: "fz.a", partition: "Default", txns: []string{"t1", "t2"}}}
	f.g.w.backup = bytes.Repeat([]byte("b"), 200)
	pid := "0b6f7a52-4c1e-4a7e-9d55-0c1b2a3d4e5f"
	f.g.w.msgs = []msgRef{{partitionID: pid, txn: "fz-1-1", queue: "fz.a"}, {partitionID: pid, txn: "dlq:ab/c ü", queue: "fz.a"}}
	f.g.w.deadLetters = []deadLetter{{id: strings.Repeat("ab", 20), partitionID: pid, txn: "fz-1-1", queue: "fz.a", group: "__QUEUE_MODE__"}}
	f.g.w.traceNames = []string{"checkout", "a b"}
	f.g.w.permits = map[string]permit{"fz-lock": {slot: 0, token: 7, owner: "w1"}}
	for range 20 {
		for _, p := range f.routes {
			r := build(p, shapes[p](f.g))
			got, _, ok := f.match(r)
			if !ok || got != p {
				t.Fatalf("%s written as %s %s reaches %q (parses: %v)", p, r.Method, r.Target, got, ok)
			}
			if r.Body != nil && p != "POST /api/v1/system/restore" && !json.Valid(r.Body) {
				t.Fatalf("%s: body is not JSON: %s", p, r.Body)
			}
		}
	}
}

// The same seed makes the same requests; another seed others.
func TestSameSeedSameRequests(t *testing.T) {
	tok := testTokens(t)
	stream := func(seed uint64) []string {
		f := testFuzzer(t, seed, tok)
		f.g.start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		var out []string
		for i := 1; i <= 300; i++ {
			r, _ := f.next(i)
			out = append(out, r.Method+" "+r.Target+" "+r.Token+" "+strings.Join(r.Mutation, ";")+" "+string(r.Body))
		}
		return out
	}
	a, b, c := stream(7), stream(7), stream(8)
	if !slices.Equal(a, b) {
		t.Fatal("seed 7 made two different streams")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 made the same stream")
	}
}

func TestEncode(t *testing.T) {
	v := o("a", 1, "b", []any{nil, true, "x\n\"\\\x01", 1.5, int64(-3)}, "c", &obj{}, "a", raw("1e400"))
	got := string(encode(v))
	want := `{"a":1,"b":[null,true,"x\u000a\"\\\u0001",1.5,-3],"c":{},"a":1e400}`
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if !json.Valid(encode(o("s", "ü🙂", "n", nil))) {
		t.Fatal("unicode does not encode as JSON")
	}
}

// at changes one value of a copy; the tree given stays as it was.
func TestAtCopies(t *testing.T) {
	tree := o("items", []any{o("queue", "q", "payload", o("n", 1))})
	before := string(encode(tree))
	for i := range count(tree) {
		out := at(tree, i, func(any) any { return "X" })
		if string(encode(tree)) != before {
			t.Fatalf("at(%d) changed the tree given", i)
		}
		if !strings.Contains(string(encode(out)), `"X"`) {
			t.Fatalf("at(%d): %s", i, encode(out))
		}
	}
}

// The mutators make what they say they make.
func TestMutators(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 5000 {
		v, what := mutateValue(r, o("queue", "orders", "n", 5, "list", []any{1, 2}))
		b := encode(v)
		head := strings.Fields(what)[0]
		seen[head] = true
		switch {
		case strings.HasPrefix(what, "duplicate member"):
			name := strings.TrimPrefix(what, "duplicate member ")
			if bytes.Count(b, []byte(name+":")) != 2 {
				t.Fatalf("%s: %s", what, b)
			}
		case strings.HasPrefix(what, "drop member"):
			name := strings.TrimPrefix(what, "drop member ")
			if bytes.Contains(b, []byte(name+":")) {
				t.Fatalf("%s: %s", what, b)
			}
		case strings.HasPrefix(what, "nesting depth"):
			if !bytes.Contains(b, []byte("[[[[")) && !bytes.Contains(b, []byte(`{"a":{"a":`)) {
				t.Fatalf("%s: %.80s", what, b)
			}
		}
	}
	for _, want := range []string{"drop", "duplicate", "add", "empty", "nesting", "type"} {
		if !seen[want] {
			t.Errorf("no mutation %q in 5000", want)
		}
	}
	// Values: numbers and strings.
	sawInvalid, sawHuge := false, false
	for range 2000 {
		v, _ := mutateValue(r, "orders")
		if s, ok := v.(raw); ok && !utf8.ValidString(string(s)) {
			sawInvalid = true
		}
		v, _ = mutateValue(r, 5)
		if s, ok := v.(raw); ok && (s == "1e400" || s == "9223372036854775808") {
			sawHuge = true
		}
	}
	if !sawInvalid || !sawHuge {
		t.Errorf("invalid UTF-8 %v, huge numbers %v", sawInvalid, sawHuge)
	}
	// Bytes.
	body := encode(o("items", []any{o("queue", "q")}))
	kinds := map[string]bool{}
	for range 500 {
		out, what := mutateText(r, body, 1024)
		kinds[strings.Fields(what)[0]] = true
		if strings.HasPrefix(what, "truncated") && (len(out) >= len(body) || !bytes.HasPrefix(body, out)) {
			t.Fatalf("%s: %q", what, out)
		}
		if strings.HasPrefix(what, "oversized") && len(out) <= 1024 {
			t.Fatalf("%s: %d bytes", what, len(out))
		}
	}
	for _, want := range []string{"truncated", "empty", "oversized", "random", "BOM"} {
		if !kinds[want] {
			t.Errorf("no text mutation %q in 500", want)
		}
	}
}

// A fuzzed body is never far past the node's limit.
func TestBodiesStayNearTheLimit(t *testing.T) {
	f := testFuzzer(t, 3, testTokens(t))
	for i := 1; i <= 3000; i++ {
		r, _ := f.next(i)
		if len(r.Body) > f.cfg.MaxBody+8<<10 {
			t.Fatalf("request %d: %d body bytes (%v)", i, len(r.Body), r.Mutation)
		}
	}
}

func TestValidKey(t *testing.T) {
	for k, want := range map[string]bool{"k": true, " k ": true, "a key": true, "": false, " ": false, "\t": false,
		"k\x80": false, "ü": false, strings.Repeat("k", 255): true, strings.Repeat("k", 256): false} {
		if validKey(k) != want {
			t.Errorf("validKey(%q) = %v", k, !want)
		}
	}
}

// The status check: the documented 503s pass, everything else 5xx fails.
func TestFiveHundreds(t *testing.T) {
	cases := []struct {
		pattern string
		status  int
		body    string
		retry   string
		ok      bool
	}{
		{"POST /api/v1/push", 503, `{"error":"no leader","code":"no_leader"}`, "1", true},
		{"POST /api/v1/push", 503, `{"error":"the leader changed","code":"retry"}`, "1", true},
		{"POST /api/v1/ack", 503, `{"error":"?","code":"outcome_unknown"}`, "1", true},
		{"POST /api/v1/kv", 503, `{"error":"kv off","code":"kv_disabled"}`, "5", true},
		{"PUT /api/v1/kv/{ns}/{key...}", 503, `{"error":"kv off","code":"kv_disabled"}`, "5", true},
		{"POST /api/v1/timers", 503, `{"error":"off","code":"timers_disabled"}`, "5", true},
		{"POST /api/v1/locks", 503, `{"error":"kv off","code":"kv_disabled"}`, "5", true},
		{"POST /api/v1/traces", 503, `{"error":"kv off","code":"kv_disabled"}`, "5", false},
		{"GET /health", 503, `{"status":"unhealthy"}`, "", true},
		{"POST /api/v1/push", 503, `{"error":"kv off","code":"kv_disabled"}`, "5", false},
		{"POST /api/v1/transaction", 503, `{"error":"off","code":"timers_disabled"}`, "5", false},
		{"POST /api/v1/push", 503, `{"error":"no leader","code":"no_leader"}`, "", false},
		{"POST /api/v1/push", 503, `{"error":"x","code":"internal"}`, "1", false},
		{"POST /api/v1/push", 500, `{"error":"internal error"}`, "", false},
		{"POST /api/v1/push", 507, `{"error":"full","code":"storage_full"}`, "10", false},
		{"GET /api/v1/dlq", 502, `{"error":"x"}`, "", false},
	}
	for _, c := range cases {
		f := testFuzzer(t, 1, testTokens(t))
		h := http.Header{}
		if c.retry != "" {
			h.Set("Retry-After", c.retry)
		}
		r := &req{Method: "GET", Target: "/", Pattern: c.pattern}
		f.checkStatus(r, c.pattern, &resp{Status: c.status, Header: h, Body: []byte(c.body)})
		if got := len(f.rep.Failures) == 0; got != c.ok {
			t.Errorf("%s %d %s Retry-After %q: passes %v, want %v", c.pattern, c.status, c.body, c.retry, got, c.ok)
		}
	}
}

func TestErrorBodies(t *testing.T) {
	for body, ok := range map[string]bool{`{"error":"x"}`: true, `{"error":"x","code":"y"}`: true, `{"success":false,"error":"Partition not found"}`: true,
		`{"error":1}`: false, `{}`: false, `[]`: false, `404 page not found`: false, ``: false} {
		f := testFuzzer(t, 1, testTokens(t))
		f.checkBody(&req{Method: "POST"}, "POST /api/v1/push", &resp{Status: 400, Body: []byte(body)})
		if got := len(f.rep.Failures) == 0; got != ok {
			t.Errorf("error body %q: passes %v", body, got)
		}
	}
	f := testFuzzer(t, 1, testTokens(t))
	f.checkBody(&req{Method: "HEAD"}, "GET /api/v1/dlq", &resp{Status: 404})
	f.checkBody(&req{Method: "GET"}, "GET /api/v1/pop/queue/{queue}", &resp{Status: 204})
	f.checkBody(&req{Method: "GET"}, "GET /metrics/prometheus", &resp{Status: 200, Body: []byte("# HELP x\n")})
	f.checkBody(&req{Method: "GET"}, "GET /api/v1/dlq", &resp{Status: 200, Body: []byte(`{"messages":[]}`)})
	if len(f.rep.Failures) != 0 {
		t.Fatalf("failures: %v", f.rep.Failures)
	}
	f.checkBody(&req{Method: "GET"}, "GET /api/v1/dlq", &resp{Status: 200, Body: []byte(`not json`)})
	if len(f.rep.Failures) != 1 {
		t.Fatal("a 2xx that is not JSON passed")
	}
}

// The auth expectation: an invalid token 401, a role below the route 403.
func TestAuthExpectations(t *testing.T) {
	tok := testTokens(t)
	kind := func(name string) tokenKind {
		for _, k := range tok.kinds {
			if k.name == name {
				return k
			}
		}
		t.Fatalf("no token kind %q", name)
		return tokenKind{}
	}
	cases := []struct {
		kind, method, target string
		status               int
		ok                   bool
	}{
		{"no token", "POST", "/api/v1/push", 401, true},
		{"no token", "POST", "/api/v1/push", 201, false},
		{"expired", "GET", "/api/v1/dlq", 403, false},
		{"no token", "GET", "/health", 200, true},
		{"no token", "GET", "/metrics", 200, true},
		{"no token", "OPTIONS", "/api/v1/push", 204, true},
		{"no token", "GET", "/api/v1/nothing-here", 401, true}, // /api/ needs read-write
		{"read-only", "POST", "/api/v1/push", 403, true},
		{"read-only", "POST", "/api/v1/push", 400, false},
		{"write-only", "POST", "/api/v1/push", 400, true},
		{"write-only", "POST", "/api/v1/ack", 403, true},
		{"write-only", "GET", "/api/v1/pop/queue/q", 204, false},
		{"read-write", "DELETE", "/api/v1/resources/queues/q", 403, true},
		{"read-write", "DELETE", "/api/v1/resources/queues/q", 200, false},
		{"admin", "DELETE", "/api/v1/resources/queues/q", 200, true},
		{"no role", "GET", "/api/v1/dlq", 200, false},
		{"read-write scoped to fz.a", "POST", "/api/v1/push", 403, true},
	}
	for _, c := range cases {
		f := testFuzzer(t, 1, tok)
		r := &req{Method: c.method, Target: c.target, Token: c.kind}
		pattern, path, _ := f.match(r)
		f.checkAuth(r, pattern, path, kind(c.kind), &resp{Status: c.status})
		if got := len(f.rep.Failures) == 0; got != c.ok {
			t.Errorf("%s %s as %s -> %d: passes %v, want %v (pattern %q)", c.method, c.target, c.kind, c.status, got, c.ok, pattern)
		}
	}
}

func TestNetHTTP400(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if !netHTTP400(&resp{Status: 400, Header: h, Body: []byte("400 Bad Request")}) {
		t.Fatal("net/http's own 400 not recognised")
	}
	h.Set("Content-Type", "application/json")
	if netHTTP400(&resp{Status: 400, Header: h, Body: []byte(`{"error":"x"}`)}) {
		t.Fatal("the API's 400 taken for net/http's")
	}
}

// The replay command sends the same bytes.
func TestShellQuote(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"plain", "it's", `{"a":"b\\n"}`, "ü\xff\x01'\\", "$HOME `x`"} {
		out, err := exec.Command("bash", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q came back as %q (%v)", s, out, err)
		}
	}
}

// A known finding is named by kind@route, optionally with the status and
// the code; a shorter name covers the longer ones, never another route.
func TestKnownFindings(t *testing.T) {
	f := testFuzzer(t, 1, testTokens(t))
	f.cfg.Known = []string{"write on a 4xx@POST /api/v1/transaction 403 kv_disabled", "write on a 4xx@POST /x"}
	cases := []struct {
		at     string
		status int
		body   string
		want   string
	}{
		{"write on a 4xx@POST /api/v1/transaction", 403, `{"error":"off","code":"kv_disabled"}`, f.cfg.Known[0]},
		{"write on a 4xx@POST /api/v1/transaction", 403, `{"error":"off","code":"timers_disabled"}`, ""},
		{"write on a 4xx@POST /api/v1/transaction", 400, `{"error":"bad"}`, ""},
		{"write on a 4xx@POST /x", 404, `{"error":"no"}`, f.cfg.Known[1]},
		{"write on a 4xx@POST /xy", 404, `{"error":"no"}`, ""},
		{"5xx@POST /x", 500, `{"error":"no"}`, ""},
	}
	for _, c := range cases {
		if got := f.known(c.at, &resp{Status: c.status, Body: []byte(c.body)}); got != c.want {
			t.Errorf("%s %d %s: known as %q, want %q", c.at, c.status, c.body, got, c.want)
		}
	}
}

// The message, dead-letter, trace and lock routes teach the world what
// they answer: messages, dead letters (gone once replayed or purged), trace
// names, permits (gone once released).
func TestLearnMessagesAndLocks(t *testing.T) {
	f := testFuzzer(t, 1, testTokens(t))
	w := f.g.w
	id1, id2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)
	pid := "0b6f7a52-4c1e-4a7e-9d55-0c1b2a3d4e5f"
	ok := func(pattern, body string) {
		t.Helper()
		f.learn(&req{Method: "GET", Valid: true}, base{}, pattern, &resp{Status: 200, Body: []byte(body)})
	}
	ok("GET /api/v1/dlq", `{"messages":[{"dlqId":"`+id1+`","partitionId":"`+pid+`","transactionId":"t1","queue":"fz.a","consumerGroup":"g1"},`+
		`{"dlqId":"`+id2+`","partitionId":"`+pid+`","transactionId":"t2","queue":"fz.b","consumerGroup":"__QUEUE_MODE__"}],"total":2}`)
	if len(w.deadLetters) != 2 || w.deadLetters[0].id != id1 || w.deadLetters[0].group != "g1" || len(w.msgs) != 2 {
		t.Fatalf("dead letters %+v, messages %+v", w.deadLetters, w.msgs)
	}
	ok("POST /api/v1/dlq/{id}/replay", `{"success":true,"verdict":"moved","dlqId":"`+id1+`","partitionId":"`+pid+`","transactionId":"dlq:`+id1+`","queue":"fz.a"}`)
	if len(w.deadLetters) != 1 || w.deadLetters[0].id != id2 || w.msgs[len(w.msgs)-1].txn != "dlq:"+id1 {
		t.Fatalf("after a replay: dead letters %+v, messages %+v", w.deadLetters, w.msgs)
	}
	ok("DELETE /api/v1/dlq", `{"success":true,"queue":"fz.b","consumerGroup":null,"purged":1}`)
	if len(w.deadLetters) != 0 {
		t.Fatalf("after a purge: %+v", w.deadLetters)
	}
	ok("GET /api/v1/messages/{partitionId}/{transactionId}", `{"partitionId":"`+pid+`","transactionId":"t3","queue":"fz.c","deadLetters":[{"dlqId":"`+id1+`","consumerGroup":"g2"}]}`)
	if len(w.deadLetters) != 1 || w.deadLetters[0].txn != "t3" || w.deadLetters[0].group != "g2" {
		t.Fatalf("from a message: %+v", w.deadLetters)
	}
	ok("GET /api/v1/traces/names", `{"names":[{"trace_name":"checkout","trace_count":2}],"total":1}`)
	f.learn(&req{Method: "POST", Valid: true}, base{body: o("transactionId", "t1", "traceNames", []any{"flow", "checkout"})},
		"POST /api/v1/traces", &resp{Status: 201, Body: []byte(`{"success":true}`)})
	if !slices.Equal(w.traceNames, []string{"checkout", "flow"}) {
		t.Fatalf("trace names %v", w.traceNames)
	}
	ok("POST /api/v1/locks", `{"results":[{"index":0,"op":"acquire","name":"sem","acquired":true,"slot":2,"token":90,"owner":"w1"},`+
		`{"index":1,"op":"acquire","name":"fz-lock","acquired":false,"reason":"held","holders":[]}]}`)
	if p, held := w.permits["sem"]; !held || p.slot != 2 || p.token != 90 || p.owner != "w1" || len(w.permits) != 1 {
		t.Fatalf("permits %+v", w.permits)
	}
	ok("POST /api/v1/locks", `{"results":[{"index":0,"op":"release","name":"sem","released":true,"slot":2}]}`)
	if len(w.permits) != 0 {
		t.Fatalf("after a release: %+v", w.permits)
	}
}
