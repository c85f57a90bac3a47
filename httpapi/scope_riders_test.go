package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/auth"
)

// The auth matrix of riders (issue 21): a token scoped to "refunds." that
// reaches another team's queue or namespace through any rider of a
// transaction (ack, push, kv, timer, position), through locks (namespace
// queen-locks), through another team's lease, or through a command that
// spans every queue, gets 403 and the state hash does not move, even when
// the rest of the call is in scope. The same call with every name in its
// scope is let through, so the refusals are the scope's.
func TestScopedTokensReachNoRiderOutsideTheirScope(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{})
	bearer := func(sub string, claims map[string]any) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token(t, sub, claims)}
	}
	admin := bearer("ops", map[string]any{"role": "admin"})
	refunds := bearer("refunds", map[string]any{"role": "read-write", "queues": []string{"refunds."}})
	scopedAdmin := bearer("refunds-ops", map[string]any{"role": "admin", "queues": []string{"refunds."}})
	call := func(hdr map[string]string, method, path, body string) (int, string) {
		code, b, _ := l.doH(method, path, body, hdr)
		return code, string(b)
	}
	mustCall := func(hdr map[string]string, method, path, body string, want int) string {
		t.Helper()
		c, b := call(hdr, method, path, body)
		if c != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, c, b, want)
		}
		return b
	}
	// Another team's queue with a message leased by that team, and one of
	// ours leased by us.
	leased := func(hdr map[string]string, queue string) popMsg {
		t.Helper()
		mustCall(hdr, "POST", "/api/v1/push", `{"items":[{"queue":"`+queue+`","transactionId":"m-`+queue+`","payload":{"n":1}}]}`, 201)
		var p struct {
			Messages []popMsg `json:"messages"`
		}
		json.Unmarshal([]byte(mustCall(hdr, "GET", "/api/v1/pop/queue/"+queue+"?batch=1", "", 200)), &p)
		if len(p.Messages) != 1 {
			t.Fatalf("no message popped from %s", queue)
		}
		return p.Messages[0]
	}
	theirs, ours := leased(admin, "orders"), leased(refunds, "refunds.orders")
	ack := func(m popMsg) string {
		return `{"type":"ack","transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID + `","leaseId":"` + m.LeaseID + `"}`
	}
	push := func(q string) string { return `{"type":"push","items":[{"queue":"` + q + `","payload":{"x":1}}]}` }
	kv := func(ns string) string {
		return `"kv":[{"op":"put","ns":"` + ns + `","key":"k","value":1,"forever":true}]`
	}
	timer := func(q string) string {
		return `"timers":[{"op":"schedule","queue":"` + q + `","timerKey":"t1","delayMs":60000,"txn":"x1","payload":"e30="}]`
	}
	position := func(q string) string {
		return `"positions":[{"queue":"` + q + `","consumerGroup":"billing","offset":null}]`
	}
	txn := func(parts ...string) string { return "{" + strings.Join(parts, ",") + "}" }
	ops := func(o ...string) string { return `"operations":[` + strings.Join(o, ",") + `]` }

	cases := []struct {
		name             string
		method, path     string
		outside, inScope string // the call reaching outside its scope, and the same wholly in scope
		hdr              map[string]string
	}{
		{"ack rider", "POST", "/api/v1/transaction", txn(ops(push("refunds.orders"), ack(theirs))), txn(ops(push("refunds.orders"), ack(ours))), refunds},
		{"push rider", "POST", "/api/v1/transaction", txn(ops(push("refunds.orders"), push("orders"))), txn(ops(push("refunds.orders"), push("refunds.audit"))), refunds},
		{"kv rider", "POST", "/api/v1/transaction", txn(ops(push("refunds.orders")), kv("charges")), txn(ops(push("refunds.orders")), kv("refunds.charges")), refunds},
		{"timer rider", "POST", "/api/v1/transaction", txn(ops(push("refunds.orders")), timer("orders")), txn(ops(push("refunds.orders")), timer("refunds.orders")), refunds},
		{"position rider", "POST", "/api/v1/transaction", txn(ops(push("refunds.orders")), position("orders")), txn(ops(push("refunds.orders")), position("refunds.orders")), refunds},
		{"the issue's timer rider alone", "POST", "/api/v1/transaction", txn(timer("orders")), txn(timer("refunds.orders")), refunds},
		{"the issue's position rider alone", "POST", "/api/v1/transaction", txn(position("orders")), txn(position("refunds.orders")), refunds},
		{"locks (namespace queen-locks)", "POST", "/api/v1/locks", `{"operations":[{"op":"acquire","name":"daily","ttlSeconds":30}]}`, "", refunds},
		{"another team's lease", "POST", "/api/v1/lease/" + theirs.LeaseID + "/extend", `{"seconds":60}`, "", refunds},
		{"a group's subscription in every queue", "POST", "/api/v1/consumer-groups/billing/subscription", `{"subscriptionTimestamp":"2026-01-01T00:00:00Z"}`, "", refunds},
		{"the operator's switches (every queue)", "POST", "/api/v1/system/maintenance", `{"enabled":true}`, "", scopedAdmin},
	}
	for _, c := range cases {
		_, before, _ := l.node.StateHash()
		if code, b := call(c.hdr, c.method, c.path, c.outside); code != 403 || !strings.Contains(b, "Insufficient permissions") {
			t.Errorf("%s: %d %s, want 403", c.name, code, b)
		}
		if _, after, _ := l.node.StateHash(); after != before {
			t.Errorf("%s: refused, but the state changed", c.name)
		}
		if c.inScope != "" {
			if code, b := call(c.hdr, c.method, c.path, c.inScope); code != 200 || !strings.Contains(b, `"success":true`) {
				t.Errorf("%s, wholly in scope: %d %s", c.name, code, b)
			}
		}
	}
	// The timer the issue saw scheduled never was: nothing pending in orders.
	if b := mustCall(admin, "GET", "/api/v1/timers/orders", "", 200); strings.Contains(b, `"t1"`) {
		t.Fatalf("a refused timer rider is pending: %s", b)
	}
	// Our own lease extends (the one above was acked and released: a
	// lease that holds nothing cannot be named, so it is refused too); an
	// unscoped token still reaches everything.
	if c, b := call(refunds, "POST", "/api/v1/lease/"+ours.LeaseID+"/extend", `{"seconds":60}`); c != 403 {
		t.Fatalf("extending a released lease with a scoped token: %d %s", c, b)
	}
	mustCall(refunds, "POST", "/api/v1/push", `{"items":[{"queue":"refunds.orders","transactionId":"m2","payload":{"n":2}}]}`, 201)
	var p struct {
		LeaseID  string   `json:"leaseId"`
		Messages []popMsg `json:"messages"`
	}
	json.Unmarshal([]byte(mustCall(refunds, "GET", "/api/v1/pop/queue/refunds.orders?batch=10", "", 200)), &p)
	if len(p.Messages) == 0 {
		t.Fatal("nothing popped from refunds.orders")
	}
	mustCall(refunds, "POST", "/api/v1/lease/"+p.Messages[0].LeaseID+"/extend", `{"seconds":60}`, 200)
	mustCall(admin, "POST", "/api/v1/transaction", txn(ops(ack(theirs)), position("orders")), 200)
}
