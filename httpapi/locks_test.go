package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/auth/authtest"
)

type lockHolder struct {
	Slot      uint32  `json:"slot"`
	Owner     *string `json:"owner"`
	Token     uint64  `json:"token"`
	Since     string  `json:"since"`
	RenewedAt string  `json:"renewedAt"`
	ExpiresAt string  `json:"expiresAt"`
}

type lockResult struct {
	Index     *int            `json:"index"`
	Op        string          `json:"op"`
	Name      string          `json:"name"`
	Acquired  *bool           `json:"acquired"`
	Renewed   *bool           `json:"renewed"`
	Released  *bool           `json:"released"`
	Held      *bool           `json:"held"`
	Already   bool            `json:"already"`
	Reason    string          `json:"reason"`
	Slot      uint32          `json:"slot"`
	Token     uint64          `json:"token"`
	Owner     *string         `json:"owner"`
	Guard     json.RawMessage `json:"guard"`
	Since     string          `json:"since"`
	ExpiresAt string          `json:"expiresAt"`
	Holders   []lockHolder    `json:"holders"`
}

func (l *live) locks(body string) []lockResult {
	l.t.Helper()
	var out struct {
		Results []lockResult `json:"results"`
	}
	l.json("POST", "/api/v1/locks", body, 200, &out)
	return out.Results
}

func (l *live) lock1(op string) lockResult {
	l.t.Helper()
	res := l.locks(`{"operations":[` + op + `]}`)
	if len(res) != 1 {
		l.t.Fatalf("%s: %d results", op, len(res))
	}
	return res[0]
}

// The four operations over HTTP, a semaphore, the guard in a transaction,
// and a same-owner retry.
func TestLiveLocks(t *testing.T) {
	l := startLive(t)
	a := l.lock1(`{"op":"acquire","name":"daily-report","ttlSeconds":30,"owner":"cron-7"}`)
	if a.Index == nil || *a.Index != 0 || a.Op != "acquire" || a.Name != "daily-report" || a.Acquired == nil || !*a.Acquired ||
		a.Slot != 0 || a.Token == 0 || a.Owner == nil || *a.Owner != "cron-7" || a.Already {
		t.Fatalf("acquire: %+v", a)
	}
	wantGuard := fmt.Sprintf(`{"expect":%d,"key":"daily-report#0","ns":"queen-locks","op":"check","required":true}`, a.Token)
	if string(a.Guard) != wantGuard {
		t.Fatalf("guard %s, want %s", a.Guard, wantGuard)
	}
	since, err1 := time.Parse(time.RFC3339Nano, a.Since)
	exp, err2 := time.Parse(time.RFC3339Nano, a.ExpiresAt)
	if err1 != nil || err2 != nil || exp.Sub(since) != 30*time.Second {
		t.Fatalf("since %q expiresAt %q", a.Since, a.ExpiresAt)
	}
	// The same owner again: the same permit.
	if r := l.lock1(`{"op":"acquire","name":"daily-report","ttlSeconds":30,"owner":"cron-7"}`); !*r.Acquired || !r.Already || r.Token != a.Token {
		t.Fatalf("the owner's retry: %+v", r)
	}
	// Somebody else: 200, acquired false, held, the holders.
	r := l.lock1(`{"op":"acquire","name":"daily-report","ttlSeconds":30,"owner":"cron-8"}`)
	if *r.Acquired || r.Reason != "held" || len(r.Holders) != 1 || *r.Holders[0].Owner != "cron-7" || r.Holders[0].Token != a.Token {
		t.Fatalf("acquire of a held lock: %+v", r)
	}
	// A guarded transaction commits while the lock is held.
	txn := func(guard json.RawMessage, n int) map[string]any {
		var out map[string]any
		l.json("POST", "/api/v1/transaction", fmt.Sprintf(`{"kv":[%s,{"op":"incr","ns":"reports","key":"runs","forever":true}],
			"operations":[{"type":"push","items":[{"queue":"reports","transactionId":"r%d","payload":{"n":%d}}]}]}`, guard, n, n), 200, &out)
		return out
	}
	if out := txn(a.Guard, 1); out["success"] != true {
		t.Fatalf("guarded transaction while held: %v", out)
	}
	// Renew: a new token and guard; the old guard stops working.
	rn := l.lock1(fmt.Sprintf(`{"op":"renew","name":"daily-report","token":%d,"ttlSeconds":10}`, a.Token))
	if rn.Renewed == nil || !*rn.Renewed || rn.Token <= a.Token || rn.Since != a.Since {
		t.Fatalf("renew: %+v", rn)
	}
	if out := txn(a.Guard, 2); out["success"] != false || out["reason"] != "kv_precondition" {
		t.Fatalf("transaction with the guard before the renew: %v", out)
	}
	if out := txn(rn.Guard, 3); out["success"] != true {
		t.Fatalf("transaction with the renewed guard: %v", out)
	}
	// Get shows the holder; a stale release is lost; the live one releases.
	g := l.lock1(`{"op":"get","name":"daily-report"}`)
	if g.Held == nil || !*g.Held || len(g.Holders) != 1 || g.Holders[0].Token != rn.Token || g.Holders[0].Since != a.Since || g.Holders[0].RenewedAt == "" {
		t.Fatalf("get: %+v", g)
	}
	if rel := l.lock1(fmt.Sprintf(`{"op":"release","name":"daily-report","token":%d}`, a.Token)); rel.Released == nil || *rel.Released || rel.Reason != "lost" {
		t.Fatalf("release with a stale token: %+v", rel)
	}
	if rel := l.lock1(fmt.Sprintf(`{"op":"release","name":"daily-report","token":%d}`, rn.Token)); !*rel.Released {
		t.Fatalf("release: %+v", rel)
	}
	if g := l.lock1(`{"op":"get","name":"daily-report"}`); *g.Held || g.Holders == nil || len(g.Holders) != 0 {
		t.Fatalf("get after the release: %+v", g)
	}
	if out := txn(rn.Guard, 4); out["success"] != false {
		t.Fatalf("transaction after the release: %v", out)
	}
	// A semaphore of two, in one call with other locks (independent ops,
	// each result with its index, op and name), as a bare array.
	res := l.locks(`[{"op":"acquire","name":"gpu","ttlSeconds":5,"owner":"a","limit":2},
		{"op":"acquire","name":"other","ttlSeconds":5},{"op":"get","name":"nothing"}]`)
	if len(res) != 3 || !*res[0].Acquired || !*res[1].Acquired || *res[2].Held || res[1].Owner != nil {
		t.Fatalf("one call of three: %+v", res)
	}
	for i, r := range res {
		if r.Index == nil || *r.Index != i || r.Name == "" || r.Op == "" {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if b := l.lock1(`{"op":"acquire","name":"gpu","ttlSeconds":5,"owner":"b","limit":2}`); !*b.Acquired || b.Slot != 1 {
		t.Fatalf("second permit: %+v", b)
	}
	if c := l.lock1(`{"op":"acquire","name":"gpu","ttlSeconds":5,"owner":"c","limit":2}`); *c.Acquired || len(c.Holders) != 2 {
		t.Fatalf("third holder of two: %+v", c)
	}
	// The permits are KV rows a read-only caller can read.
	var kv map[string]any
	l.json("GET", "/api/v1/kv/queen-locks/gpu%231", "", 200, &kv)
	if kv["found"] != true || fmt.Sprint(kv["value"]) != "map[owner:b]" {
		t.Fatalf("the permit's KV row: %v", kv)
	}
	// An empty call applies nothing.
	if res := l.locks(`{"operations":[]}`); len(res) != 0 {
		t.Fatalf("empty call: %+v", res)
	}
}

// Every refusal of the rules is a 400 {"error":"locks_bad_request",
// "reason", "detail"} that writes nothing.
func TestLiveLockRefusalsWriteNothing(t *testing.T) {
	l := startLive(t)
	l.lock1(`{"op":"acquire","name":"taken","ttlSeconds":60,"owner":"w"}`)
	hash := func() string {
		idx, h, err := l.node.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h, "@", idx)
	}
	gets := make([]string, 65)
	for i := range gets {
		gets[i] = fmt.Sprintf(`{"op":"get","name":"l%d"}`, i)
	}
	wide := make([]string, 5)
	for i := range wide {
		wide[i] = fmt.Sprintf(`{"op":"acquire","name":"s%d","ttlSeconds":1,"limit":1024}`, i)
	}
	acq := `{"op":"acquire","name":"a","ttlSeconds":30,`
	cases := []struct{ body, reason string }{
		{`{"operations":{}}`, "locks_bad_body"},
		{`{"operations":["acquire"]}`, "locks_bad_request"},
		{`[{"name":"a","ttlSeconds":1}]`, "locks_unknown_op"},
		{`[{"op":"lock","name":"a"}]`, "locks_unknown_op"},
		{`[{"op":7,"name":"a"}]`, "locks_unknown_op"},
		{`[{"op":"get"}]`, "locks_bad_name"},
		{`[{"op":"get","name":"a","tenant":"t1"}]`, "locks_tenant_in_body"},
		{`{"operations":[{"op":"acquire","name":"a","ttlSeconds":30,"tenantId":"t1"}]}`, "locks_tenant_in_body"},
		{`[{"op":"get","name":""}]`, "locks_bad_name"},
		{`[{"op":"get","name":"a#1"}]`, "locks_bad_name"},
		{`[{"op":"get","name":"a\nb"}]`, "locks_bad_name"},
		{`[{"op":"get","name":"a\u0000b"}]`, "locks_bad_name"},
		{`[{"op":"get","name":7}]`, "locks_bad_name"},
		{`[{"op":"get","name":"` + strings.Repeat("x", 257) + `"}]`, "locks_bad_name"},
		{`[{"op":"acquire","name":"a"}]`, "locks_ttl_required"},
		{`[{"op":"acquire","name":"a","forever":true}]`, "locks_ttl_required"},
		{`[{"op":"acquire","name":"a","ttlSeconds":30,"forever":true}]`, "locks_ttl_required"},
		{`[{"op":"acquire","name":"a","ttlSeconds":0}]`, "locks_bad_ttl"},
		{`[{"op":"acquire","name":"a","ttlSeconds":-5}]`, "locks_bad_ttl"},
		{`[{"op":"acquire","name":"a","ttlSeconds":1.5}]`, "locks_bad_ttl"},
		{`[{"op":"acquire","name":"a","ttlSeconds":"30"}]`, "locks_bad_ttl"},
		{`[` + acq + `"owner":""}]`, "locks_bad_owner"},
		{`[` + acq + `"owner":7}]`, "locks_bad_owner"},
		{`[` + acq + `"owner":"` + strings.Repeat("o", 257) + `"}]`, "locks_bad_owner"},
		{`[` + acq + `"owner":"a\tb"}]`, "locks_bad_owner"},
		{`[` + acq + `"limit":0}]`, "locks_bad_limit"},
		{`[` + acq + `"limit":1025}]`, "locks_bad_limit"},
		{`[` + acq + `"limit":"2"}]`, "locks_bad_limit"},
		{`[{"op":"renew","name":"taken","ttlSeconds":1}]`, "locks_token_required"},
		{`[{"op":"renew","name":"taken","token":1}]`, "locks_ttl_required"},
		{`[{"op":"release","name":"taken"}]`, "locks_token_required"},
		{`[{"op":"release","name":"taken","token":0}]`, "locks_bad_token"},
		{`[{"op":"release","name":"taken","token":"7"}]`, "locks_bad_token"},
		{`[{"op":"release","name":"taken","token":7,"slot":-1}]`, "locks_bad_slot"},
		{`[{"op":"release","name":"taken","token":7,"slot":1024}]`, "locks_bad_slot"},
		{`[{"op":"get","name":"a"},{"op":"release","name":"a","token":7}]`, "locks_duplicate_in_call"},
		// A valid op before the refused one is not applied either.
		{`[{"op":"acquire","name":"free","ttlSeconds":60},{"op":"acquire","name":"free","ttlSeconds":60}]`, "locks_duplicate_in_call"},
		{`[` + strings.Join(gets, ",") + `]`, "locks_too_many_ops"},
		{`[` + strings.Join(wide, ",") + `]`, "locks_too_many_keys"},
	}
	for _, c := range cases {
		send := func() (int, []byte) { return l.do("POST", "/api/v1/locks", c.body) }
		before := hash()
		code, b := send()
		var e struct{ Error, Reason, Detail string }
		json.Unmarshal(b, &e)
		if code != 400 || e.Error != "locks_bad_request" || e.Reason != c.reason || e.Detail == "" {
			t.Errorf("%.80s: %d %s, want 400 locks_bad_request %s", c.body, code, b, c.reason)
			continue
		}
		if !authtest.Unchanged(hash, before, func() { send() }) {
			t.Errorf("%.80s: refused, and the state changed", c.body)
		}
	}
	for _, body := range []string{``, `{`, `"x"`} {
		if code, b := l.do("POST", "/api/v1/locks", body); code != 400 || !strings.Contains(string(b), `"error"`) {
			t.Errorf("body %q: %d %s", body, code, b)
		}
	}
	if g := l.lock1(`{"op":"get","name":"free"}`); *g.Held {
		t.Fatalf("a refused call acquired a lock: %+v", g)
	}
	if g := l.lock1(`{"op":"get","name":"taken"}`); !*g.Held || *g.Holders[0].Owner != "w" {
		t.Fatalf("the refusals changed a held lock: %+v", g)
	}
}

// The operator's KV switch stops locks (503 kv_disabled, nothing written).
func TestLiveLocksFollowTheKVSwitch(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/system/kv-timers", `{"kv":false}`, 200, nil)
	code, b, hdr := l.doH("POST", "/api/v1/locks", `[{"op":"acquire","name":"a","ttlSeconds":5}]`, nil)
	if code != 503 || !strings.Contains(string(b), `"kv_disabled"`) || hdr.Get("Retry-After") == "" {
		t.Fatalf("acquire with KV off: %d %s", code, b)
	}
	l.json("POST", "/api/v1/system/kv-timers", `{"kv":true}`, 200, nil)
	if g := l.lock1(`{"op":"get","name":"a"}`); *g.Held {
		t.Fatalf("acquired with KV off: %+v", g)
	}
}

// A scoped token reaches locks only with the queen-locks namespace in its
// scope, as it reaches the permits' KV rows and the guard's check.
func TestLiveLocksAndScopes(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	body := `[{"op":"acquire","name":"a","ttlSeconds":5}]`
	as := func(queues []string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token(t, "w", map[string]any{"role": "read-write", "queues": queues})}
	}
	if code, b, _ := l.doH("POST", "/api/v1/locks", body, as([]string{"refunds."})); code != 403 {
		t.Fatalf("locks with a scope that does not reach queen-locks: %d %s", code, b)
	}
	if code, b, _ := l.doH("POST", "/api/v1/locks", body, as([]string{"refunds.", "queen-locks"})); code != 200 {
		t.Fatalf("locks with queen-locks in the scope: %d %s", code, b)
	}
	ro := map[string]string{"Authorization": "Bearer " + token(t, "v", map[string]any{"role": "read-only"})}
	if code, b, _ := l.doH("POST", "/api/v1/locks", `[{"op":"get","name":"a"}]`, ro); code != 403 {
		t.Fatalf("a read-only token on the read-write route: %d %s", code, b)
	}
}

// An Idempotency-Key makes even an anonymous acquire safe to resend: the
// retry gets the first answer, not "held".
func TestLiveLocksWithAnIdempotencyKey(t *testing.T) {
	l := startLive(t)
	body := `[{"op":"acquire","name":"once","ttlSeconds":30}]`
	hdr := map[string]string{"Idempotency-Key": "acquire-once-1"}
	code1, b1, _ := l.doH("POST", "/api/v1/locks", body, hdr)
	code2, b2, h2 := l.doH("POST", "/api/v1/locks", body, hdr)
	if code1 != 200 || code2 != 200 || string(b1) != string(b2) || h2.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(b1), `"acquired":true`) {
		t.Fatalf("first %d %s; retry %d %s (replayed %q)", code1, b1, code2, b2, h2.Get("Idempotent-Replayed"))
	}
	if r := l.lock1(`{"op":"acquire","name":"once","ttlSeconds":30}`); *r.Acquired {
		t.Fatalf("a call without the key: %+v", r)
	}
}
