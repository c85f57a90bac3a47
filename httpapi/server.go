package httpapi

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/backup"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/tenant"
)

// Backend is what the API needs from a node.
type Backend interface {
	Apply(ctx context.Context, cmd *command.Command) (proto.Message, error)
	Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error)
	Read(ctx context.Context, level cluster.ReadLevel, fn func(*fsm.Reader) error) error
	Query(ctx context.Context, level cluster.ReadLevel, q *command.Query) (*command.QueryResult, error)
	Now() int64
	Status() cluster.RaftStatus
	Load() cluster.LoadStatus
	StateHash() (applied uint64, hash string, err error)
	PartitionQueue(ctx context.Context, pid []byte) (string, bool)
	LeaseQueues(ctx context.Context, leaseID string) ([]string, bool)
	Backup(ctx context.Context, w io.Writer, version string) (backup.Header, error)
	Restore(ctx context.Context, r io.Reader) (backup.Header, uint64, error)
	Cluster() cluster.ClusterView
	RemoveServer(ctx context.Context, id, actor string) error
	DrainPushBuffer(ctx context.Context, timeout time.Duration) uint64
	ID() string
	Ready() bool
	Tenants() []string // the tenants the node's state holds, the default first
	// GroupsStatus is every Raft group's role, term, applied and commit
	// index and leader, group 0 first (one with --raft-groups 1).
	GroupsStatus() []cluster.GroupStatus
	// StatusOf and GroupFor are the Raft state and the number of the
	// group of the tenant ctx carries.
	StatusOf(ctx context.Context) cluster.RaftStatus
	GroupFor(ctx context.Context) int
	// Placements is the placement table of tenants on groups (none with
	// one group).
	Placements() []cluster.Placement
	// StateHashIn is the state hash of the group ctx names
	// (cluster.WithGroup; group 0 without one).
	StateHashIn(ctx context.Context) (uint64, string, error)
}

// Config configures the API.
type Config struct {
	Backend  Backend
	Logger   *slog.Logger
	Registry *prometheus.Registry // served at /metrics/prometheus; also where API metrics go
	Gatherer prometheus.Gatherer  // what /metrics/prometheus serves; nil = Registry
	// Rules are the node's request rules, shared with the gRPC API; nil =
	// the defaults.
	Rules *request.Rules
	// MaxBodyBytes bounds a request body; 0 = 16 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds a write's wait for its entry; 0 = 10s.
	RequestTimeout time.Duration
	Version        string
	// Auth checks bearer tokens (spec §4.17); nil = JWT off.
	Auth *auth.Verifier
	// TrustTenantHeader reads a request's tenant from the x-queen-tenant
	// header when its token has no tenant claim (--trust-tenant-header:
	// behind a proxy that sets it); otherwise the header is ignored.
	TrustTenantHeader bool
	// SecurityWarnings say what leaves the node open beyond loopback;
	// /health shows them.
	SecurityWarnings []string
	// PeerTLS, when set, says the nodes' HTTP APIs are HTTPS: the status
	// views read the other nodes' /health with it (peers.go); nil = HTTP.
	PeerTLS *tls.Config
}

// API is the HTTP handler.
type API struct {
	cfg      Config
	b        Backend
	pipe     *pipeline.Pipeline // the write path every front end shares
	rules    *request.Rules
	log      *slog.Logger
	mux      *http.ServeMux
	patterns []string // every pattern registered, for Routes
	m        *apiMetrics
	started  time.Time

	peerOnce sync.Once
	peerHC   *http.Client // reads the other nodes' /health (peers.go)

	tenants *tenant.Door // decides each request's tenant
}

// New builds the handler.
func New(cfg Config) *API {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Rules == nil {
		cfg.Rules = request.New(request.Options{})
	}
	a := &API{cfg: cfg, b: cfg.Backend, rules: cfg.Rules, log: cfg.Logger.With("component", "http"), mux: http.NewServeMux(), started: time.Now()}
	a.tenants = &tenant.Door{TrustHeader: cfg.TrustTenantHeader, Log: a.log, Front: "http"}
	a.pipe = pipeline.New(pipeline.Config{Node: cfg.Backend, Timeout: cfg.RequestTimeout, Logger: a.log, Front: "http"})
	var reg prometheus.Registerer
	if cfg.Registry != nil {
		reg = cfg.Registry
	}
	a.m = newAPIMetrics(reg)
	a.routes()
	return a
}

// Routes lists every route pattern the API serves ("METHOD /path"), in
// registration order.
func (a *API) Routes() []string { return append([]string(nil), a.patterns...) }

func (a *API) routes() {
	h := func(pattern string, fn func(http.ResponseWriter, *http.Request)) {
		a.patterns = append(a.patterns, pattern)
		a.mux.HandleFunc(pattern, fn)
	}
	h("GET /health", a.health)
	h("GET /metrics", a.metricsJSON)
	var g prometheus.Gatherer
	if a.cfg.Registry != nil {
		g = a.cfg.Registry
	}
	if a.cfg.Gatherer != nil {
		g = a.cfg.Gatherer
	}
	if g != nil {
		a.mux.Handle("GET /metrics/prometheus", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
		a.patterns = append(a.patterns, "GET /metrics/prometheus")
	}
	h("POST /api/v1/configure", a.configure)
	h("POST /api/v1/push", a.push)
	h("GET /api/v1/pop/queue/{queue}", a.popQueue)
	h("GET /api/v1/pop/queue/{queue}/partition/{partition}", a.popPartition)
	h("GET /api/v1/pop", a.popNamespace)
	h("POST /api/v1/ack", a.ack)
	h("POST /api/v1/ack/batch", a.ackBatch)
	h("POST /api/v1/transaction", a.transaction)
	h("POST /api/v1/lease/{leaseId}/extend", a.extendLease)
	h("GET /api/v1/resources/queues", a.listQueues)
	h("GET /api/v1/resources/queues/{queue}", a.getQueue)
	h("GET /api/v1/resources/queues/{queue}/depth", a.queueDepth)
	h("DELETE /api/v1/resources/queues/{queue}", a.deleteQueue)
	h("GET /api/v1/dlq", a.dlq)
	h("POST /api/v1/kv", a.kvBatch)
	h("GET /api/v1/kv/{ns}/{key...}", a.kvGet)
	h("PUT /api/v1/kv/{ns}/{key...}", a.kvPut)
	h("DELETE /api/v1/kv/{ns}/{key...}", a.kvDelete)
	h("POST /api/v1/timers", a.timersPost)
	h("GET /api/v1/timers/{queue}", a.timerList)
	h("GET /api/v1/timers/{queue}/{timerKey...}", a.timerGet)
	h("DELETE /api/v1/timers/{queue}/{timerKey...}", a.timerDelete)
	h("GET /api/v1/system/cluster", a.clusterView)
	h("DELETE /api/v1/system/cluster/nodes/{id}", a.removeNode)
	h("GET /api/v1/consumer-groups", a.listGroups)
	h("GET /api/v1/consumer-groups/lagging", a.laggingGroups)
	h("GET /api/v1/consumer-groups/{group}", a.getGroup)
	h("DELETE /api/v1/consumer-groups/{group}", a.deleteGroup)
	h("DELETE /api/v1/consumer-groups/{group}/queues/{queue}", a.deleteGroup)
	h("POST /api/v1/consumer-groups/{group}/subscription", a.setSubscription)
	h("POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", a.seekQueue)
	h("POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", a.seekPartition)
	h("POST /api/v1/stats/refresh", a.statsRefresh)
	h("GET /api/v1/system/maintenance", a.getMaintenance)
	h("POST /api/v1/system/maintenance", a.setMaintenance)
	h("GET /api/v1/system/maintenance/pop", a.getPopMaintenance)
	h("POST /api/v1/system/maintenance/pop", a.setPopMaintenance)
	h("GET /api/v1/system/tenants", a.listTenants)
	h("POST /api/v1/system/tenants/{tenant}/pin", a.pinTenant)
	h("GET /api/v1/system/state-hash", a.stateHash)
	h("GET /api/v1/system/audit", a.auditTrail)
	h("GET /api/v1/system/backup", a.backup)
	h("POST /api/v1/system/restore", a.restore)
	h("GET /api/v1/system/kv-timers", a.getSwitches)
	h("POST /api/v1/system/kv-timers", a.setSwitches)
	h("GET /api/v1/messages", a.listMessages)
	h("GET /api/v1/messages/{partitionId}/{transactionId}", a.getMessage)
	h("DELETE /api/v1/messages/{partitionId}/{transactionId}", a.deleteMessage)
	h("POST /api/v1/messages/{partitionId}/{transactionId}/retry", a.retryMessage)
	h("POST /api/v1/dlq/{id}/replay", a.replayDeadLetter)
	h("DELETE /api/v1/dlq", a.purgeDLQ)
	h("POST /api/v1/traces", a.recordTrace)
	h("GET /api/v1/traces/names", a.traceNames)
	h("GET /api/v1/traces/by-name/{name}", a.tracesByName) // wins over {partitionId}/{transactionId} (spec §4.15)
	h("GET /api/v1/traces/{partitionId}/{transactionId}", a.messageTraces)
	h("POST /api/v1/locks", a.locksPost)
	h("POST /streams/v1/queries", a.streamRegister) // streams.go (spec §4.16)
	h("POST /streams/v1/cycle", a.streamCycle)
	h("POST /streams/v1/state/get", a.streamStateGet)
	h("GET /streams/v1/queries", a.streamQueries)
	h("DELETE /streams/v1/queries/{name}", a.streamDeleteQuery)
	// Status and analytics (spec §4.12): read-only views, status*.go and analytics*.go.
	h("GET /api/v1/status", a.status)
	h("GET /api/v1/status/queues", a.statusQueues)
	h("GET /api/v1/status/queues/{queue}", a.statusQueue)
	h("GET /api/v1/status/queues/{queue}/messages", a.statusQueueMessages)
	h("GET /api/v1/status/analytics", a.statusAnalytics)
	h("GET /api/v1/status/buffers", a.statusBuffers)
	h("GET /api/v1/analytics/queue-lag", a.analyticsQueueLag)
	h("GET /api/v1/analytics/queue-ops", a.analyticsQueueOps)
	h("GET /api/v1/analytics/retention", a.analyticsRetention)
	h("GET /api/v1/analytics/system-metrics", a.analyticsSystemMetrics)
	h("GET /api/v1/analytics/worker-metrics", a.analyticsWorkerMetrics)
	h("GET /api/v1/analytics/queue-parked-replicas", a.analyticsParkedReplicas)
	h("GET /api/v1/analytics/postgres-stats", a.analyticsPostgresStats)
	h("/api/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, "Not found: "+r.Method+" "+r.URL.Path)
	})
	h("/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, "Not found: "+r.Method+" "+r.URL.Path)
	})
}

// ServeHTTP adds CORS headers, answers OPTIONS, and turns a handler panic
// into a 500 instead of a dropped connection.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", "*")
	hdr.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	hdr.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, Idempotency-Key, X-Queen-Tenant")
	hdr.Set("Access-Control-Max-Age", "86400")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.log.Error("handler panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			writeError(w, &request.Error{Kind: request.Internal, Msg: "internal error"})
		}
	}()
	a.m.requests.Inc()
	_, pattern := a.mux.Handler(r)
	if pattern == "" {
		// The mux's own 404/405 answers are plain text; ours are JSON.
		notFound(w, "Not found: "+r.Method+" "+r.URL.Path)
		return
	}
	r, ok := a.authorize(w, r, pattern)
	if !ok {
		return
	}
	if r, ok = a.withTenant(w, r); !ok {
		return
	}
	a.mux.ServeHTTP(w, r)
}
