package main

import (
	"encoding/json"
	"strings"
)

// Scoped transactions (issue 21): the fuzzer's scoped token reaches the
// queues and namespaces whose names start with scopePrefix. A scoped
// transaction mixes riders in its scope and, most of the time, at least
// one outside it (an ack of another queue's lease, a push, a KV op, a
// timer or a position elsewhere). One that reaches outside must be 403 and
// change nothing (its state hash is always compared); one wholly inside,
// without an ack (whose partition may be gone), must not be refused.

const scopePrefix = "fz.a"

// scopedTransaction builds one such transaction, sent with the scoped
// token; r.Scope says which of the two it is.
func (f *fuzzer) scopedTransaction() (*req, base) {
	g := f.g
	outside := false
	place := func() bool { // true: this rider (added now) reaches outside
		out := g.r.IntN(3) == 0
		outside = outside || out
		return out
	}
	queue := func(out bool) string {
		if out {
			return pick(g.r, []string{"fz.b", "orders", "fz.ret"})
		}
		return pick(g.r, []string{"fz.a", "fz.a.sub"})
	}
	var ops []any
	acked := false // an ack names a partition the fuzzer may have deleted since: refused as unknown
	if out := g.r.IntN(3) == 0; g.r.IntN(2) == 0 {
		if l, ok := f.scopedLease(out); ok {
			outside, acked = outside || out, true
			a := g.ackItem(l, l.txns[0])
			a.keys, a.vals = append([]string{"type"}, a.keys...), append([]any{"ack"}, a.vals...)
			ops = append(ops, a)
		}
	}
	if len(ops) == 0 || g.r.IntN(2) == 0 {
		it := o("queue", queue(place()), "payload", g.payload())
		ops = append(ops, o("type", "push", "items", []any{it}))
	}
	x := o("operations", ops)
	if g.r.IntN(2) == 0 {
		ns := "fz.a"
		if place() {
			ns = pick(g.r, []string{"fz.b", "charges", "queen-locks"})
		}
		x.set("kv", []any{o("op", "put", "ns", ns, "key", "k", "value", 1, "ttlSeconds", 60)})
	}
	if g.r.IntN(3) == 0 {
		x.set("timers", []any{o("op", "schedule", "queue", queue(place()), "timerKey", "scoped", "delayMs", 60000,
			"txn", g.txn(), "payload", "e30=")})
	}
	if g.r.IntN(3) == 0 {
		x.set("positions", []any{o("queue", queue(place()), "consumerGroup", "fz-g", "offset", nil)})
	}
	b := base{body: x}
	r := build("POST /api/v1/transaction", b)
	kind := f.tok.scoped
	r.Token = kind.name
	r.Header = append(r.Header, []string{"Authorization", kind.header})
	switch {
	case outside:
		r.Scope = "outside"
	case !acked:
		r.Scope = "inside"
	}
	return r, b
}

// scopedLease is a lease the node answered, of a queue inside the scope
// (out=false) or outside it; ok=false when the fuzzer knows none.
func (f *fuzzer) scopedLease(out bool) (lease, bool) {
	for i := len(f.g.w.leases) - 1; i >= 0; i-- {
		if l := f.g.w.leases[i]; strings.HasPrefix(l.queue, scopePrefix) != out && len(l.txns) > 0 {
			return l, true
		}
	}
	return lease{}, false
}

// checkScope holds a scoped transaction's answer to its scope: outside,
// 403 "Insufficient permissions" (the unchanged state is checked with
// every 4xx's); inside, never that refusal (a 403 of another kind, such as
// an operator's switch, may come).
func (f *fuzzer) checkScope(r *req, resp *resp) {
	var body struct {
		Error string `json:"error"`
	}
	json.Unmarshal(resp.Body, &body)
	refused := resp.Status == 403 && body.Error == "Insufficient permissions"
	switch r.Scope {
	case "outside":
		f.rep.ScopeChecks++
		if !refused {
			f.fail(failScope, r, resp, "a scoped token reached outside "+scopePrefix+`: want 403 "Insufficient permissions"`)
		}
	case "inside":
		f.rep.ScopeChecks++
		if refused {
			f.fail(failScope, r, resp, "a scoped token was refused a transaction wholly inside "+scopePrefix)
		}
	}
}
