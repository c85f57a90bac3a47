package pipeline

import (
	"strings"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/fsm"
)

// The access table (spec §3, addendum §4.11): the level every operation a
// client may call needs with JWT on, by its HTTP route and by its gRPC
// method, in one place. A route or method not listed needs read-write (the
// spec's default); TestEveryRouteAndMethodHasAnAccessRow lists them all
// anyway. Producer marks what a write-only token may call: push and timer
// schedules (the command's own Access then says whether what it carries is
// a producer's: a timer call with a cancel is not).
//
// The route decides at the door, before the body is read; the command's
// kind decides again in the write path (fsm.Kind.Access), so a front end
// without routes (or a route that proposes more than its level suggests)
// cannot let a caller run what its role does not reach.
type operation struct {
	http     []string // "METHOD /pattern", as httpapi registers it
	grpc     []string // queen.v1 method names
	level    auth.Level
	producer bool
}

var operations = []operation{
	// Public: health and metrics (spec §4.13).
	{http: []string{"GET /health", "GET /metrics", "GET /metrics/prometheus"}, grpc: []string{"Leader", "NodeHealth"}, level: auth.Public},

	// Producers.
	{http: []string{"POST /api/v1/push"}, grpc: []string{"Push"}, level: auth.ReadWrite, producer: true},
	{http: []string{"POST /api/v1/timers"}, grpc: []string{"Timers"}, level: auth.ReadWrite, producer: true},

	// Consumers and the rest of the writes: read-write.
	{http: []string{"POST /api/v1/configure"}, grpc: []string{"Configure"}, level: auth.ReadWrite},
	{http: []string{"GET /api/v1/pop/queue/{queue}", "GET /api/v1/pop/queue/{queue}/partition/{partition}", "GET /api/v1/pop"},
		grpc: []string{"Pop", "Consume"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/ack", "POST /api/v1/ack/batch"}, grpc: []string{"Ack", "AckBatch"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/transaction"}, grpc: []string{"Transaction"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/lease/{leaseId}/extend"}, grpc: []string{"ExtendLease"}, level: auth.ReadWrite},
	{http: []string{"PUT /api/v1/kv/{ns}/{key...}", "DELETE /api/v1/kv/{ns}/{key...}"}, level: auth.ReadWrite},
	{http: []string{"DELETE /api/v1/timers/{queue}/{timerKey...}"}, grpc: []string{"CancelTimer"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/consumer-groups/{group}/subscription", "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek"}, grpc: []string{"SeekConsumerGroup"}, level: auth.ReadWrite},
	// A deletion, a replay and a trace are read-write: a replay appends a
	// stored message again, as a push or a backward seek does, and the
	// audit trail records it.
	{http: []string{"DELETE /api/v1/messages/{partitionId}/{transactionId}"}, grpc: []string{"DeleteMessage"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/messages/{partitionId}/{transactionId}/retry", "POST /api/v1/dlq/{id}/replay"},
		grpc: []string{"ReplayDeadLetter"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/traces"}, grpc: []string{"RecordTrace"}, level: auth.ReadWrite},
	{http: []string{"POST /api/v1/locks"}, grpc: []string{"Locks"}, level: auth.ReadWrite},
	// Streams (spec §4.16): register and cycle write; state/get reads.
	{http: []string{"POST /streams/v1/queries", "POST /streams/v1/cycle"}, level: auth.ReadWrite},
	{http: []string{"POST /streams/v1/state/get"}, level: auth.ReadOnly},

	// A KV call of reads only is read-only (spec §3: "reads: read-only");
	// one with a write needs read-write, which its command's kind asks.
	{http: []string{"POST /api/v1/kv", "GET /api/v1/kv/{ns}/{key...}"}, grpc: []string{"Kv"}, level: auth.ReadOnly},

	// Reads: read-only.
	{http: []string{"GET /api/v1/resources/queues", "GET /api/v1/resources/queues/{queue}",
		"GET /api/v1/resources/queues/{queue}/depth"}, grpc: []string{"QueueDepth"}, level: auth.ReadOnly},
	{http: []string{"GET /api/v1/dlq"}, grpc: []string{"ListDeadLetters"}, level: auth.ReadOnly},
	{http: []string{"GET /api/v1/timers/{queue}", "GET /api/v1/timers/{queue}/{timerKey...}"},
		grpc: []string{"GetTimer", "ListTimers", "CountTimers"}, level: auth.ReadOnly},
	{http: []string{"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging", "GET /api/v1/consumer-groups/{group}"},
		grpc: []string{"ListConsumerGroups"}, level: auth.ReadOnly},
	{http: []string{"GET /api/v1/messages", "GET /api/v1/messages/{partitionId}/{transactionId}"},
		grpc: []string{"ListMessages", "GetMessage"}, level: auth.ReadOnly},
	{http: []string{"GET /api/v1/traces/names", "GET /api/v1/traces/by-name/{name}", "GET /api/v1/traces/{partitionId}/{transactionId}"},
		grpc: []string{"TraceNames", "TracesByName", "ListTraces"}, level: auth.ReadOnly},
	// Status and analytics (spec §4.12): read-only views.
	{http: []string{"GET /api/v1/status", "GET /api/v1/status/queues", "GET /api/v1/status/queues/{queue}",
		"GET /api/v1/status/queues/{queue}/messages", "GET /api/v1/status/analytics", "GET /api/v1/status/buffers",
		"GET /api/v1/analytics/queue-lag", "GET /api/v1/analytics/queue-ops", "GET /api/v1/analytics/retention",
		"GET /api/v1/analytics/system-metrics", "GET /api/v1/analytics/worker-metrics",
		"GET /api/v1/analytics/queue-parked-replicas", "GET /api/v1/analytics/postgres-stats"}, level: auth.ReadOnly},

	// Admin: deleting a queue or a group, stats refresh, maintenance, the
	// switches, backup, restore, the state hash, the audit trail, voter
	// removal, and a DLQ purge (it destroys records for good).
	{http: []string{"DELETE /api/v1/resources/queues/{queue}"}, grpc: []string{"DeleteQueue"}, level: auth.Admin},
	{http: []string{"DELETE /api/v1/consumer-groups/{group}", "DELETE /api/v1/consumer-groups/{group}/queues/{queue}"},
		grpc: []string{"DeleteConsumerGroup"}, level: auth.Admin},
	{http: []string{"POST /api/v1/stats/refresh"}, level: auth.Admin},
	// What spans every tenant of the log is an operator's (an admin of the
	// default tenant or of every tenant, never a tenant's own admin): the
	// switches and maintenance, the cluster, the state hash, backup and
	// restore, voter removal. The audit trail is each tenant's own.
	{http: []string{"GET /api/v1/system/maintenance", "POST /api/v1/system/maintenance", "GET /api/v1/system/maintenance/pop",
		"POST /api/v1/system/maintenance/pop", "GET /api/v1/system/kv-timers", "POST /api/v1/system/kv-timers"}, level: auth.Operator},
	// Addendum §4.11: "/api/v1/system/* admin", the cluster view included.
	{http: []string{"GET /api/v1/system/cluster", "GET /api/v1/system/state-hash", "GET /api/v1/system/backup",
		"POST /api/v1/system/restore", "DELETE /api/v1/system/cluster/nodes/{id}"}, level: auth.Operator},
	{http: []string{"GET /api/v1/system/audit"}, level: auth.Admin},
	// The placement of tenants on Raft groups spans every tenant (issue 26).
	{http: []string{"GET /api/v1/system/tenants", "POST /api/v1/system/tenants/{tenant}/pin"}, level: auth.Operator},
	{http: []string{"DELETE /api/v1/dlq"}, grpc: []string{"PurgeDeadLetters"}, level: auth.Admin},
	// The operator's view of stream queries: list and delete.
	{http: []string{"GET /streams/v1/queries", "DELETE /streams/v1/queries/{name}"}, level: auth.Admin},
}

// Access is what a caller needs for a route or a method, as for a
// command: a level, and whether a write-only token may call it.
type Access = fsm.Access

var routeAccess, methodAccess = func() (map[string]Access, map[string]Access) {
	routes, methods := map[string]Access{}, map[string]Access{}
	for _, op := range operations {
		a := Access{Level: op.level, Producer: op.producer}
		for _, r := range op.http {
			if _, dup := routes[r]; dup {
				panic("pipeline: route listed twice in the access table: " + r)
			}
			routes[r] = a
		}
		for _, m := range op.grpc {
			if _, dup := methods[m]; dup {
				panic("pipeline: method listed twice in the access table: " + m)
			}
			methods[m] = a
		}
	}
	return routes, methods
}()

// RouteAccess is what an HTTP route pattern ("METHOD /path", as
// registered) needs.
func RouteAccess(pattern string) Access {
	if a, ok := routeAccess[pattern]; ok {
		return a
	}
	return Access{Level: auth.ReadWrite}
}

// PublicService is the full-method prefix of the public gRPC API.
const PublicService = "/queen.v1.Queen/"

// MethodAccess is what a full gRPC method name needs. Methods outside the
// public service (health, reflection) are public; the internal forwarding
// service is peer-to-peer, not behind tokens (its callers are nodes).
func MethodAccess(fullMethod string) Access {
	name, ok := strings.CutPrefix(fullMethod, PublicService)
	if !ok {
		return Access{Level: auth.Public}
	}
	if a, ok := methodAccess[name]; ok {
		return a
	}
	return Access{Level: auth.ReadWrite}
}

// Listed reports whether a route or a method name has its own row.
func Listed(routeOrMethod string) bool {
	_, r := routeAccess[routeOrMethod]
	_, m := methodAccess[routeOrMethod]
	return r || m
}
