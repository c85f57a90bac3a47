package pipeline_test

import (
	"strings"
	"testing"

	"github.com/queen-node/queen-node/auth"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/pipeline"
)

// specLevels are the route levels as spec §3's endpoint summary and the
// addendum's §4.11 state them, transcribed here from the spec's text (its
// row, then the routes it names in the mux's pattern syntax), not from the
// access table, so that the table is held against the spec. A route the
// spec does not name is ours; its source says where its level comes from.
var specLevels = []struct {
	source string
	level  auth.Level
	routes []string
}{
	{"§3 GET /health, /metrics, /metrics/prometheus: public", auth.Public,
		[]string{"GET /health", "GET /metrics", "GET /metrics/prometheus"}},
	{"§3 POST /api/v1/configure: read-write", auth.ReadWrite, []string{"POST /api/v1/configure"}},
	{"§3 POST /api/v1/push: read-write (§4.11: write-only reaches it)", auth.ReadWrite, []string{"POST /api/v1/push"}},
	{"§3 the three pop routes: read-write", auth.ReadWrite, []string{"GET /api/v1/pop/queue/{queue}",
		"GET /api/v1/pop/queue/{queue}/partition/{partition}", "GET /api/v1/pop"}},
	{"§3 POST /api/v1/ack, /ack/batch: read-write", auth.ReadWrite, []string{"POST /api/v1/ack", "POST /api/v1/ack/batch"}},
	{"§3 POST /api/v1/transaction: read-write", auth.ReadWrite, []string{"POST /api/v1/transaction"}},
	{"§3 POST /api/v1/lease/:leaseId/extend: read-write", auth.ReadWrite, []string{"POST /api/v1/lease/{leaseId}/extend"}},
	{"§3 KV: read-write (reads: read-only); §4.11 GET /api/v1/kv* read-only, KV writes read-write", auth.ReadOnly,
		[]string{"POST /api/v1/kv", "GET /api/v1/kv/{ns}/{key...}"}},
	{"§3 KV writes: read-write", auth.ReadWrite, []string{"PUT /api/v1/kv/{ns}/{key...}", "DELETE /api/v1/kv/{ns}/{key...}"}},
	{"§3 GET /api/v1/resources/queues, .../queues/:queue: read-only (addendum §8 adds /depth, a read)", auth.ReadOnly,
		[]string{"GET /api/v1/resources/queues", "GET /api/v1/resources/queues/{queue}", "GET /api/v1/resources/queues/{queue}/depth"}},
	{"§3 DELETE /api/v1/resources/queues/:queue: admin", auth.Admin, []string{"DELETE /api/v1/resources/queues/{queue}"}},
	{"§3 GET /api/v1/messages, /messages/:p/:t: read-only", auth.ReadOnly,
		[]string{"GET /api/v1/messages", "GET /api/v1/messages/{partitionId}/{transactionId}"}},
	{"§3 DELETE /api/v1/messages/:p/:t: read-write", auth.ReadWrite, []string{"DELETE /api/v1/messages/{partitionId}/{transactionId}"}},
	{"§3 names POST /messages/:p/:t/retry among the clients' routes; ours: it appends again, as a push, read-write", auth.ReadWrite,
		[]string{"POST /api/v1/messages/{partitionId}/{transactionId}/retry", "POST /api/v1/dlq/{id}/replay"}},
	{"§3 GET /api/v1/dlq: read-only", auth.ReadOnly, []string{"GET /api/v1/dlq"}},
	{"ours: a DLQ purge destroys records for good, as deleting a queue does: admin", auth.Admin, []string{"DELETE /api/v1/dlq"}},
	{"§3 GET /api/v1/consumer-groups, /lagging, /:group: read-only", auth.ReadOnly,
		[]string{"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging", "GET /api/v1/consumer-groups/{group}"}},
	{"§3 DELETE /api/v1/consumer-groups/:group, /:group/queues/:queue: admin", auth.Admin,
		[]string{"DELETE /api/v1/consumer-groups/{group}", "DELETE /api/v1/consumer-groups/{group}/queues/{queue}"}},
	{"§3 subscription and the two seeks: read-write", auth.ReadWrite, []string{"POST /api/v1/consumer-groups/{group}/subscription",
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek"}},
	{"§3 POST /api/v1/stats/refresh: admin", auth.Admin, []string{"POST /api/v1/stats/refresh"}},
	{"§3 status and analytics: read-only", auth.ReadOnly, []string{"GET /api/v1/status", "GET /api/v1/status/queues",
		"GET /api/v1/status/queues/{queue}", "GET /api/v1/status/queues/{queue}/messages", "GET /api/v1/status/analytics",
		"GET /api/v1/status/buffers", "GET /api/v1/analytics/queue-lag", "GET /api/v1/analytics/queue-ops",
		"GET /api/v1/analytics/retention", "GET /api/v1/analytics/system-metrics", "GET /api/v1/analytics/worker-metrics",
		"GET /api/v1/analytics/queue-parked-replicas", "GET /api/v1/analytics/postgres-stats"}},
	// Issue 26 narrows the spec's admin to an operator (an admin of the
	// default tenant or of every tenant) where the route spans every
	// tenant of the log; a token without a tenant claim is as before.
	{"§3 maintenance: admin; §3 GET /api/v1/system/kv-timers admin; §4.11 /api/v1/system/* admin; issue 26: the log's", auth.Operator,
		[]string{"GET /api/v1/system/maintenance", "POST /api/v1/system/maintenance", "GET /api/v1/system/maintenance/pop",
			"POST /api/v1/system/maintenance/pop", "GET /api/v1/system/kv-timers", "POST /api/v1/system/kv-timers",
			"GET /api/v1/system/cluster", "DELETE /api/v1/system/cluster/nodes/{id}", "GET /api/v1/system/state-hash",
			"GET /api/v1/system/backup", "POST /api/v1/system/restore"}},
	{"§4.11 /api/v1/system/* admin (the audit trail is each tenant's own)", auth.Admin, []string{"GET /api/v1/system/audit"}},
	{"issue 26: the placement of tenants on Raft groups, the log's", auth.Operator,
		[]string{"GET /api/v1/system/tenants", "POST /api/v1/system/tenants/{tenant}/pin"}},
	{"§3 POST /api/v1/traces: RW", auth.ReadWrite, []string{"POST /api/v1/traces"}},
	{"§3 GET /api/v1/traces/names, /by-name/:name, /:p/:t: RO", auth.ReadOnly, []string{"GET /api/v1/traces/names",
		"GET /api/v1/traces/by-name/{name}", "GET /api/v1/traces/{partitionId}/{transactionId}"}},
	{"§4.11 POST /api/v1/timers: write-only (and read-write)", auth.ReadWrite, []string{"POST /api/v1/timers"}},
	{"§4.11 DELETE /api/v1/timers/*: read-write", auth.ReadWrite, []string{"DELETE /api/v1/timers/{queue}/{timerKey...}"}},
	{"§4.11 GET /api/v1/timers*: read-only", auth.ReadOnly, []string{"GET /api/v1/timers/{queue}", "GET /api/v1/timers/{queue}/{timerKey...}"}},
	{"§4.11 POST /api/v1/locks: read-write", auth.ReadWrite, []string{"POST /api/v1/locks"}},
	{"§3 POST /streams/v1/queries, /streams/v1/cycle: read-write", auth.ReadWrite, []string{"POST /streams/v1/queries", "POST /streams/v1/cycle"}},
	{"§3 POST /streams/v1/state/get (read-only)", auth.ReadOnly, []string{"POST /streams/v1/state/get"}},
	{"ours (issue 24): listing and deleting stream queries is the operator's, as the system routes are", auth.Admin,
		[]string{"GET /streams/v1/queries", "DELETE /streams/v1/queries/{name}"}},
}

// producerRoutes are what §4.11 lets a write-only token reach.
var producerRoutes = map[string]bool{"POST /api/v1/push": true, "POST /api/v1/timers": true}

// grpcTwins names, for every queen.v1 method, the spec route whose level
// it takes (the HTTP call it mirrors).
var grpcTwins = map[string]string{
	"Push": "POST /api/v1/push", "Pop": "GET /api/v1/pop/queue/{queue}", "Consume": "GET /api/v1/pop/queue/{queue}",
	"Ack": "POST /api/v1/ack", "AckBatch": "POST /api/v1/ack/batch", "Transaction": "POST /api/v1/transaction",
	"ExtendLease": "POST /api/v1/lease/{leaseId}/extend", "Configure": "POST /api/v1/configure",
	"DeleteQueue": "DELETE /api/v1/resources/queues/{queue}", "Kv": "POST /api/v1/kv", "Timers": "POST /api/v1/timers",
	"CancelTimer": "DELETE /api/v1/timers/{queue}/{timerKey...}", "GetTimer": "GET /api/v1/timers/{queue}/{timerKey...}",
	"ListTimers": "GET /api/v1/timers/{queue}", "CountTimers": "GET /api/v1/timers/{queue}",
	"ListMessages": "GET /api/v1/messages", "GetMessage": "GET /api/v1/messages/{partitionId}/{transactionId}",
	"DeleteMessage": "DELETE /api/v1/messages/{partitionId}/{transactionId}", "ReplayDeadLetter": "POST /api/v1/dlq/{id}/replay",
	"PurgeDeadLetters": "DELETE /api/v1/dlq", "RecordTrace": "POST /api/v1/traces",
	"ListTraces": "GET /api/v1/traces/{partitionId}/{transactionId}", "TracesByName": "GET /api/v1/traces/by-name/{name}",
	"TraceNames": "GET /api/v1/traces/names", "QueueDepth": "GET /api/v1/resources/queues/{queue}/depth",
	"Locks": "POST /api/v1/locks", "Leader": "GET /health", "NodeHealth": "GET /health",
	"ListConsumerGroups": "GET /api/v1/consumer-groups", "SeekConsumerGroup": "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
	"DeleteConsumerGroup": "DELETE /api/v1/consumer-groups/{group}", "ListDeadLetters": "GET /api/v1/dlq",
}

func spec(t *testing.T) map[string]auth.Level {
	t.Helper()
	out := map[string]auth.Level{}
	for _, row := range specLevels {
		for _, r := range row.routes {
			if _, dup := out[r]; dup {
				t.Fatalf("%s is transcribed twice", r)
			}
			out[r] = row.level
		}
	}
	return out
}

// Every route the HTTP API serves has the level the spec gives it, and a
// row of its own in the access table; only push and timer schedules let a
// write-only token in.
func TestEveryRouteHasTheSpecsLevel(t *testing.T) {
	levels := spec(t)
	routes := httpapi.New(httpapi.Config{}).Routes()
	if len(routes) < 60 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, r := range routes {
		if !strings.Contains(r, " ") {
			continue // the catch-alls that answer 404 for no route (no method, no level)
		}
		want, ok := levels[r]
		if !ok {
			t.Errorf("%s: the spec's level is not transcribed in specLevels", r)
			continue
		}
		if !pipeline.Listed(r) {
			t.Errorf("%s: no row of its own in the access table", r)
		}
		got := pipeline.RouteAccess(r)
		if got.Level != want || got.Producer != producerRoutes[r] {
			t.Errorf("%s: level %d producer %v, want %d %v", r, got.Level, got.Producer, want, producerRoutes[r])
		}
	}
}

// Every queen.v1 method has its HTTP twin's level, a row of its own in the
// access table, and health and reflection stay public.
func TestEveryMethodHasItsTwinsLevel(t *testing.T) {
	levels := spec(t)
	svc := pb.File_grpcapi_queenpb_queen_proto.Services().ByName("Queen")
	methods := svc.Methods()
	for i := 0; i < methods.Len(); i++ {
		name := string(methods.Get(i).Name())
		twin, ok := grpcTwins[name]
		if !ok {
			t.Errorf("%s: no HTTP twin named in grpcTwins", name)
			continue
		}
		if !pipeline.Listed(name) {
			t.Errorf("%s: no row of its own in the access table", name)
		}
		full := "/" + string(svc.FullName()) + "/" + name
		if !strings.HasPrefix(full, pipeline.PublicService) {
			t.Fatalf("%s is not under %s", full, pipeline.PublicService)
		}
		got := pipeline.MethodAccess(full)
		if got.Level != levels[twin] || got.Producer != producerRoutes[twin] {
			t.Errorf("%s: level %d producer %v, want %s's %d %v", name, got.Level, got.Producer, twin, levels[twin], producerRoutes[twin])
		}
	}
	for _, m := range []string{"/grpc.health.v1.Health/Check", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"} {
		if pipeline.MethodAccess(m).Level != auth.Public {
			t.Errorf("%s is not public", m)
		}
	}
}
