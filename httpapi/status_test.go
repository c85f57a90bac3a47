package httpapi_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/queen-node/queen-node/httpapi"
)

func failBody(m popMsg, text string) string {
	b, _ := json.Marshal(map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": m.LeaseID, "consumerGroup": m.ConsumerGroup, "status": "failed", "error": text})
	return string(b)
}

// num reads a number at a path of a decoded JSON document.
func num(t *testing.T, doc any, path ...any) float64 {
	t.Helper()
	v := dig(t, doc, path...)
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v: %v is not a number", path, v)
	}
	return f
}

func dig(t *testing.T, doc any, path ...any) any {
	t.Helper()
	v := doc
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: no object at %q (%v)", path, k, v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("%v: no key %q in %v", path, k, m)
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("%v: no element %d in %v", path, k, v)
			}
			v = a[k]
		}
	}
	return v
}

// The status and analytics routes (spec §4.12) on a real node: their
// top-level keys, and numbers that match what the test did: five pushes,
// two consumed by a group, two failed acks of which the second
// dead-lettered the message.
func TestStatusAndAnalyticsRoutes(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"st.orders","options":{"retryLimit":1,"retryDelay":0}}`, 200, nil)
	for i := range 5 {
		l.json("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":"st.orders","transactionId":"o%d","payload":{"n":%d}}]}`, i, i), 201, nil)
	}
	p := l.pop("/api/v1/pop/queue/st.orders?consumerGroup=billing&subscriptionMode=all&batch=2")
	if len(p.Messages) != 2 {
		t.Fatalf("group pop: %+v", p)
	}
	l.json("POST", "/api/v1/ack/batch", fmt.Sprintf(`{"consumerGroup":"billing","acknowledgments":[%s,%s]}`,
		ackBody(p.Messages[0], "completed"), ackBody(p.Messages[1], "completed")), 200, nil)
	for range 2 {
		q := l.pop("/api/v1/pop/queue/st.orders?wait=true&timeout=3000")
		if len(q.Messages) != 1 {
			t.Fatalf("queue-mode pop: %+v", q)
		}
		l.json("POST", "/api/v1/ack", failBody(q.Messages[0], "card 4242 declined"), 200, nil)
	}

	before := l.node.Status().LastIndex
	get := func(path string) any {
		t.Helper()
		var doc any
		l.json("GET", path, "", 200, &doc)
		return doc
	}

	st := get("/api/v1/status")
	for _, k := range []string{"timeRange", "throughput", "queues", "messages", "leases", "consumerGroups", "deadLetterQueue", "cluster", "counts", "node"} {
		dig(t, st, k)
	}
	eqf := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	eqf("status messages.total", num(t, st, "messages", "total"), 5)
	eqf("status dead letters", num(t, st, "deadLetterQueue", "totalMessages"), 1)
	eqf("status signature count", num(t, st, "deadLetterQueue", "topErrors", 0, "count"), 1)
	if sig := dig(t, st, "deadLetterQueue", "topErrors", 0, "signature"); sig != "card <n> declined" {
		t.Errorf("signature %q", sig)
	}
	var ingested, processed, failed, dead float64
	for _, pt := range dig(t, st, "throughput").([]any) {
		ingested += num(t, pt, "ingested")
		processed += num(t, pt, "processed")
		failed += num(t, pt, "failed")
		dead += num(t, pt, "deadLettered")
	}
	eqf("throughput ingested", ingested, 5)
	eqf("throughput processed", processed, 2)
	eqf("throughput failed", failed, 2)
	eqf("throughput dead-lettered", dead, 1)
	eqf("cluster size", num(t, st, "cluster", "size"), 1)
	if dig(t, st, "cluster", "nodes", 0, "self") != true || dig(t, st, "cluster", "nodes", 0, "role") != "leader" {
		t.Errorf("cluster: %v", dig(t, st, "cluster"))
	}
	if dig(t, st, "counts", "countedBy") != "live" || dig(t, st, "counts", "since") != nil {
		t.Errorf("counts: %v", dig(t, st, "counts"))
	}

	qs := get("/api/v1/status/queues?limit=10")
	eqf("queues total", num(t, qs, "pagination", "total"), 1)
	if dig(t, qs, "queues", 0, "name") != "st.orders" || dig(t, qs, "queues", 0, "namespace") != "st" {
		t.Errorf("queue row: %v", dig(t, qs, "queues", 0))
	}
	eqf("queue row pending", num(t, qs, "queues", 0, "messages", "pending"), 4) // queue mode: o0 went to the DLQ
	eqf("queue row dead letters", num(t, qs, "queues", 0, "messages", "deadLetter"), 1)

	q := get("/api/v1/status/queues/st.orders?includePartitions=true")
	eqf("config retryLimit", num(t, q, "queue", "config", "retryLimit"), 1)
	eqf("partitions", float64(len(dig(t, q, "partitions").([]any))), 1)
	eqf("totals", num(t, q, "totals", "messages", "total"), 5)
	if parts := dig(t, get("/api/v1/status/queues/st.orders?includePartitions=false"), "partitions").([]any); len(parts) != 0 {
		t.Errorf("includePartitions=false: %v", parts)
	}
	if code, b := l.do("GET", "/api/v1/status/queues/nope", ""); code != 404 {
		t.Errorf("unknown queue: %d %s", code, b)
	}
	msgs := get("/api/v1/status/queues/st.orders/messages?limit=3")
	eqf("messages page", float64(len(dig(t, msgs, "messages").([]any))), 3)

	an := get("/api/v1/status/analytics?interval=minute")
	if dig(t, an, "timeRange", "interval") != "minute" {
		t.Errorf("interval: %v", dig(t, an, "timeRange"))
	}
	eqf("analytics ingested", num(t, an, "throughput", "totals", "ingested"), 5)
	eqf("analytics processed", num(t, an, "throughput", "totals", "processed"), 2)
	eqf("analytics failed", num(t, an, "errorRates", "overall", "failed"), 2)
	eqf("analytics dlq total", num(t, an, "deadLetterQueue", "total"), 1)
	eqf("analytics pending now", num(t, an, "queueDepths", "current", "pending"), 4)
	if dig(t, an, "topQueues", 0, "name") != "st.orders" {
		t.Errorf("top queues: %v", dig(t, an, "topQueues"))
	}
	hour := get("/api/v1/status/analytics?queue=st.orders")
	eqf("hourly ingested", num(t, hour, "throughput", "totals", "ingested"), 5)
	other := get("/api/v1/status/analytics?queue=other")
	eqf("another queue's ingested", num(t, other, "throughput", "totals", "ingested"), 0)

	ops := get("/api/v1/analytics/queue-ops")
	var pushes float64
	for _, row := range dig(t, ops, "series").([]any) {
		pushes += num(t, row, "pushMessages")
	}
	eqf("queue-ops pushes", pushes, 5)
	var popCount float64
	for _, row := range get("/api/v1/analytics/queue-lag").([]any) {
		popCount += num(t, row, "popCount")
	}
	eqf("queue-lag pops", popCount, 4)
	eqf("retention events", num(t, get("/api/v1/analytics/retention"), "totals", "eventCount"), 0)
	eqf("system-metrics replicas", float64(len(dig(t, get("/api/v1/analytics/system-metrics"), "replicas").([]any))), 1)
	for path, keys := range map[string][]string{
		"/api/v1/analytics/worker-metrics":        {"timeRange", "series", "workers"},
		"/api/v1/analytics/queue-parked-replicas": {"timeRange", "bucketMinutes", "series", "replicas"},
		"/api/v1/analytics/postgres-stats":        {"database", "tables"},
		"/api/v1/status/buffers":                  {"buffers"},
	} {
		doc := get(path)
		for _, k := range keys {
			dig(t, doc, k)
		}
	}
	if after := l.node.Status().LastIndex; after != before {
		t.Errorf("the status routes wrote entries: last index %d → %d", before, after)
	}
}

func TestErrorSignatures(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"card 4242 declined", "card <n> declined"},
		{"timeout after 3.5s talking to 10.0.0.7", "timeout after <n>s talking to <n>.<n>"},
		{"order 0190f8e4-1b2c-7d3e-8f40-1234567890ab not found", "order <id> not found"},
		{"  many   spaces ", "many spaces"},
		{"hash deadbeefcafe1234 bad", "hash <hex> bad"},
	} {
		if got := httpapi.ErrorSignature(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
