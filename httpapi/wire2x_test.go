package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The wire details of Queen 2.x (addendum §7), one check per rule, on a
// live node: each refusal is a 400 with its reason, and writes nothing.
func TestWireDetailsOf2x(t *testing.T) {
	l := startLive(t)
	reasonOf := func(method, path, body string) (int, string, string) {
		t.Helper()
		code, b := l.do(method, path, body)
		var e struct{ Error, Reason string }
		json.Unmarshal(b, &e)
		return code, e.Reason, e.Error
	}
	refused := func(what, method, path, body, reason string) {
		t.Helper()
		if code, got, text := reasonOf(method, path, body); code != 400 || got != reason {
			t.Errorf("%s: %d %q (%s), want 400 %q", what, code, got, text, reason)
		}
	}

	// KV: index on every result, in both envelopes.
	for _, body := range []string{
		`{"operations":[{"op":"put","ns":"w","key":"a","value":1,"forever":true},{"op":"get","ns":"w","key":"a"}]}`,
		`[{"op":"put","ns":"w","key":"b","value":2,"forever":true},{"op":"get","ns":"w","key":"b"}]`,
	} {
		var out struct {
			Results []map[string]any `json:"results"`
		}
		l.json("POST", "/api/v1/kv", body, 200, &out)
		for i, r := range out.Results {
			if r["index"] != float64(i) {
				t.Errorf("KV result %d of %s has index %v", i, body, r["index"])
			}
		}
	}
	// The GET path route: an ETag of the version on a hit, none on a miss.
	code, b, h := l.doH("GET", "/api/v1/kv/w/a", "", nil)
	var hit struct{ Version uint64 }
	json.Unmarshal(b, &hit)
	if code != 200 || h.Get("ETag") != fmt.Sprintf(`"%d"`, hit.Version) || hit.Version == 0 {
		t.Errorf("GET hit: %d ETag %q, body %s", code, h.Get("ETag"), b)
	}
	if code, _, h := l.doH("GET", "/api/v1/kv/w/absent", "", nil); code != 200 || h.Get("ETag") != "" {
		t.Errorf("GET miss: %d ETag %q", code, h.Get("ETag"))
	}
	refused("a query string on a path route", "GET", "/api/v1/kv/w/a?consistency=stale", "", "kv_no_query_string")
	refused("a body naming the key", "PUT", "/api/v1/kv/w/a", `{"key":"a","value":1,"forever":true}`, "kv_field_in_path")
	refused("a body naming the namespace", "PUT", "/api/v1/kv/w/a", `{"ns":"w","value":1,"forever":true}`, "kv_field_in_path")
	refused("incr with expect", "POST", "/api/v1/kv", `[{"op":"incr","ns":"w","key":"n","expect":1,"forever":true}]`, "kv_bad_expect")
	refused("getPrefix without a prefix", "POST", "/api/v1/kv", `[{"op":"getPrefix","ns":"w"}]`, "kv_prefix_required")
	refused("getPrefix with an empty prefix", "POST", "/api/v1/kv", `[{"op":"getPrefix","ns":"w","prefix":""}]`, "kv_prefix_required")
	refused("a tenant inside an op", "POST", "/api/v1/kv", `[{"op":"get","ns":"w","key":"a","tenant":"t1"}]`, "kv_tenant_in_body")

	// Timers.
	sched := func(extra string) string {
		return `{"operations":[{"op":"schedule","queue":"q","timerKey":"k","txn":"x","payload":"e30="` + extra + `}]}`
	}
	refused("a schedule without delayMs", "POST", "/api/v1/timers", sched(``), "timers_delay_required")
	refused("a payload that is not base64", "POST", "/api/v1/timers",
		`{"operations":[{"op":"schedule","queue":"q","timerKey":"k","txn":"x","delayMs":10,"payload":"%%%"}]}`, "timers_payload_not_base64")

	// Transactions: null riders mean absent; a rider that is not an array
	// says where it belongs; getPrefix is named; riders carry opIndex.
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"tq","transactionId":"t1"}]}`, 201, nil)
	var txn struct {
		Success bool
		Reason  string
		Error   string
		Results []map[string]any
	}
	l.json("POST", "/api/v1/transaction", `{"operations":[{"type":"push","queue":"tq","transactionId":"t2"}],"kv":null,"timers":null}`, 200, &txn)
	if !txn.Success {
		t.Errorf("null riders: %+v", txn)
	}
	for _, rider := range []string{"kv", "timers", "positions"} {
		code, _, text := reasonOf("POST", "/api/v1/transaction", `{"operations":[],"`+rider+`":{"op":"get"}}`)
		if code != 400 || !strings.Contains(text, "TOP LEVEL") {
			t.Errorf("%s not an array: %d %q", rider, code, text)
		}
	}
	if code, _, text := reasonOf("POST", "/api/v1/transaction", `{"kv":[{"op":"getPrefix","ns":"w","prefix":"a"}]}`); code != 400 || !strings.Contains(text+" ", "getPrefix") {
		t.Errorf("getPrefix in a transaction: %d %q", code, text)
	}
	l.json("POST", "/api/v1/transaction", `{"kv":[{"op":"put","ns":"w","key":"x","value":1,"forever":true},{"op":"get","ns":"w","key":"x"}],
		"timers":[{"op":"schedule","queue":"tq","timerKey":"k1","delayMs":60000,"txn":"x1","payload":"e30="}],
		"positions":[{"queue":"tq","consumerGroup":"g","offset":1}]}`, 200, &txn)
	if !txn.Success || len(txn.Results) != 4 {
		t.Fatalf("riders: %+v", txn)
	}
	for i, want := range []struct {
		typ     string
		opIndex float64
	}{{"kv", 0}, {"kv", 1}, {"timer", 0}, {"position", 0}} {
		r := txn.Results[i]
		if r["type"] != want.typ || r["opIndex"] != want.opIndex || r["index"] != float64(i) {
			t.Errorf("result %d: %v, want type %s opIndex %v", i, r, want.typ, want.opIndex)
		}
	}
}

// Positions and the 2.x verdict vocabulary over HTTP (addendum §4.2,
// §4.5): a rewound group reads again from its offset; the refusals are 200
// with success:false and a reason, and write nothing.
func TestTransactionPositionsAndVerdictsOverHTTP(t *testing.T) {
	l := startLive(t)
	var items []string
	for i := 1; i <= 3; i++ {
		items = append(items, fmt.Sprintf(`{"queue":"pq","transactionId":"m%d"}`, i))
	}
	l.json("POST", "/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, 201, nil)
	pop := func() []string {
		code, b := l.do("GET", "/api/v1/pop/queue/pq?consumerGroup=g&subscriptionMode=all&batch=10", "")
		var out struct{ Messages []popMsg }
		if code == 200 {
			json.Unmarshal(b, &out)
		}
		var txns []string
		for _, m := range out.Messages {
			txns = append(txns, m.TransactionID)
		}
		return txns
	}
	if got := pop(); len(got) != 3 {
		t.Fatalf("first pop: %v", got)
	}
	verdict := func(body string) (bool, string) {
		var out struct {
			Success bool
			Reason  string
		}
		l.json("POST", "/api/v1/transaction", body, 200, &out)
		return out.Success, out.Reason
	}
	if ok, reason := verdict(`{"positions":[{"queue":"pq","consumerGroup":"g","offset":2,"metadata":{"why":"replay"}}]}`); !ok {
		t.Fatalf("rewind: %s", reason)
	}
	if got := strings.Join(pop(), ","); got != "m2,m3" {
		t.Fatalf("after the rewind to offset 2 the group read %q", got)
	}
	for _, c := range []struct{ name, body, reason string }{
		{"a queue that does not exist", `{"operations":[{"type":"push","queue":"pq","transactionId":"x"}],"positions":[{"queue":"nope","consumerGroup":"g","offset":1}]}`, "queue_not_found"},
		{"metadata over 4096 bytes", `{"positions":[{"queue":"pq","consumerGroup":"g","offset":1,"metadata":"` + strings.Repeat("m", 5000) + `"}]}`, "too_large"},
		{"a queue name too long", `{"operations":[{"type":"push","queue":"` + strings.Repeat("q", 600) + `"}]}`, "name_too_long"},
		{"a KV key too large", `{"kv":[{"op":"get","ns":"w","key":"` + strings.Repeat("k", 600) + `"}]}`, "kv_key_too_large"},
	} {
		if ok, reason := verdict(c.body); ok || reason != c.reason {
			t.Errorf("%s: success %v reason %q, want %q", c.name, ok, reason, c.reason)
		}
	}
	if got := pop(); len(got) != 0 {
		t.Errorf("a refused transaction moved the group: it read %v", got)
	}
	// Outside a transaction a long name is a 413 with the code.
	code, b := l.do("POST", "/api/v1/push", `{"items":[{"queue":"`+strings.Repeat("q", 600)+`"}]}`)
	if code != 413 || !strings.Contains(string(b), `"code":"name_too_long"`) {
		t.Errorf("a long queue name on push: %d %s", code, b)
	}
}

// /health's raft object has 2.x's shape (addendum §4.13).
func TestHealthRaftObjectOf2x(t *testing.T) {
	l := startLive(t)
	var h struct {
		Status string
		Raft   map[string]any
	}
	l.json("GET", "/health", "", 200, &h)
	for _, k := range []string{"role", "leader", "term", "applied", "commit", "lag", "storageReady", "clusterVersion", "kinds", "apply"} {
		if _, ok := h.Raft[k]; !ok {
			t.Errorf("raft.%s is missing: %v", k, h.Raft)
		}
	}
	apply, _ := h.Raft["apply"].(map[string]any)
	if h.Status != "healthy" || h.Raft["role"] != "leader" || h.Raft["leader"] != true || h.Raft["storageReady"] != true ||
		h.Raft["kinds"].(float64) < 20 || apply == nil || apply["failure"] != nil || len(apply["skipped"].([]any)) != 0 {
		t.Errorf("health: %+v", h)
	}
}

// Conflation and queue depth over HTTP (addendum §8).
func TestConflationAndDepthOverHTTP(t *testing.T) {
	l := startLive(t)
	for _, path := range []string{
		"/api/v1/pop/queue/px?conflation=true", // queue mode
		"/api/v1/pop/queue/px?conflation=true&consumerGroup=g&autoAck=true",
	} {
		if code, b := l.do("GET", path, ""); code != 400 || !strings.Contains(string(b), "conflation") {
			t.Errorf("%s: %d %s, want 400", path, code, b)
		}
	}
	var items []string
	for i := 1; i <= 5; i++ {
		items = append(items, fmt.Sprintf(`{"queue":"px","partition":"eur","transactionId":"p%d"}`, i))
	}
	items = append(items, `{"queue":"px","partition":"usd","transactionId":"u1"}`)
	l.json("POST", "/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, 201, nil)
	var depth map[string]any
	l.json("GET", "/api/v1/resources/queues/px/depth?group=ui", "", 200, &depth)
	if depth["pending"] != float64(6) || depth["partitionsPending"] != float64(2) || depth["effectivePending"] != float64(6) || depth["conflation"] != false {
		t.Errorf("depth before a policy: %v", depth)
	}
	// The queue's option is the default a flag-less registration stores.
	l.json("POST", "/api/v1/configure", `{"queue":"px","options":{"conflation":true}}`, 200, nil)
	l.json("GET", "/api/v1/resources/queues/px/depth?group=ui", "", 200, &depth)
	if depth["conflation"] != true || depth["effectivePending"] != float64(2) || depth["effectiveReady"] != float64(2) {
		t.Errorf("depth under conflation: %v", depth)
	}
	var pop struct {
		Conflation         *bool
		ConflationConflict bool
		Messages           []popMsg
	}
	l.json("GET", "/api/v1/pop/queue/px/partition/eur?consumerGroup=ui&subscriptionMode=all&batch=10", "", 200, &pop)
	if len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "p5" || pop.Conflation == nil || !*pop.Conflation {
		t.Fatalf("a conflated pop: %+v", pop)
	}
	l.json("GET", "/api/v1/resources/queues/px/depth?group=ui", "", 200, &depth)
	if depth["processing"] != float64(5) {
		t.Errorf("depth while the conflated delivery is processed: %v", depth)
	}
	ui := pop
	ui.Messages = append([]popMsg(nil), pop.Messages...) // the next decode reuses the array
	// A group that registers with the flag off keeps it, whatever the option.
	pop.Conflation = nil
	l.json("GET", "/api/v1/pop/queue/px/partition/eur?consumerGroup=audit&subscriptionMode=all&batch=10&conflation=false", "", 200, &pop)
	if len(pop.Messages) != 5 || pop.Conflation != nil && *pop.Conflation || pop.ConflationConflict {
		t.Fatalf("a group registered off: %+v", pop)
	}
	l.json("GET", "/api/v1/resources/queues/px/depth?group=audit", "", 200, &depth)
	if depth["conflation"] != false || depth["effectivePending"] != float64(6) || depth["processing"] != float64(5) {
		t.Errorf("depth of a non-conflating group: %v", depth)
	}
	// Without a group: the worst cursor (ui and audit both have 6 pending),
	// read as non-conflating.
	l.json("GET", "/api/v1/resources/queues/px/depth", "", 200, &depth)
	if depth["conflation"] != false || depth["pending"] != float64(6) || depth["effectivePending"] != float64(6) || depth["processing"] != float64(5) || depth["ready"] != float64(1) {
		t.Errorf("depth without a group: %v", depth)
	}
	ack := fmt.Sprintf(`{"transactionId":"p5","partitionId":%q,"leaseId":%q,"consumerGroup":"ui","status":"completed"}`, ui.Messages[0].PartitionID, ui.Messages[0].LeaseID)
	l.json("POST", "/api/v1/ack", ack, 200, nil)
	// Nothing left in eur: a pop that names the flag gets a 200 with a body
	// even when empty (agreeing or conflicting); a flag-less one a 204.
	code, b := l.do("GET", "/api/v1/pop/queue/px/partition/eur?consumerGroup=ui&conflation=false", "")
	if code != 200 || !strings.Contains(string(b), `"conflationConflict":true`) || !strings.Contains(string(b), `"conflation":true`) || !strings.Contains(string(b), `"messages":[]`) {
		t.Errorf("an empty pop whose flag conflicts: %d %s", code, b)
	}
	code, b = l.do("GET", "/api/v1/pop/queue/px/partition/eur?consumerGroup=ui&conflation=true", "")
	if code != 200 || strings.Contains(string(b), `conflationConflict`) || !strings.Contains(string(b), `"conflation":true`) || !strings.Contains(string(b), `"messages":[]`) {
		t.Errorf("an empty pop whose flag agrees: %d %s", code, b)
	}
	if code, _ := l.do("GET", "/api/v1/pop/queue/px/partition/eur?consumerGroup=ui", ""); code != 204 {
		t.Errorf("an empty flag-less pop: %d, want 204", code)
	}
	if code, b := l.do("GET", "/api/v1/resources/queues/nope/depth", ""); code != 404 {
		t.Errorf("depth of no queue: %d %s", code, b)
	}
	_, prom := l.do("GET", "/metrics/prometheus", "")
	if !strings.Contains(string(prom), `queen_queue_conflated_per_minute{queue="px",tenant="default"} 4`) {
		t.Errorf("the conflated gauge: %s", grepLines(string(prom), "conflated"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
