package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

// healthStatus is a node's /health status: "damaged" once it found its
// own files damaged (package damage: it serves nothing damaged, but a load
// balancer should send clients elsewhere), "settling" while it knows no
// leader or is far behind the commit, else "healthy".
func (a *API) healthStatus(st cluster.RaftStatus) string {
	switch {
	case st.Damage != nil:
		return "damaged"
	case !a.b.Ready():
		return "settling"
	}
	return "healthy"
}

// health is GET /health: 200 when this node can serve writes (it leads or
// knows a leader) and found nothing damaged, 503 otherwise, with the Raft
// view of addendum §4.13.
func (a *API) health(w http.ResponseWriter, r *http.Request) {
	st := a.b.Status()
	status, code := a.healthStatus(st), http.StatusOK
	if status != "healthy" {
		code = http.StatusServiceUnavailable
	}
	var dmg any
	if d := st.Damage; d != nil {
		dmg = map[string]any{"where": d.Where, "reason": d.Reason, "since": d.At.UTC().Format(time.RFC3339Nano), "count": d.Count}
	}
	var resync any
	if rs := st.Resync; rs != nil {
		resync = map[string]any{"phase": rs.Phase, "since": rs.Since.UTC().Format(time.RFC3339Nano), "target": rs.Target}
	}
	lag := uint64(0)
	if st.CommitIndex > st.Applied {
		lag = st.CommitIndex - st.Applied
	}
	writeJSON(w, code, map[string]any{
		"status": status, "database": "connected", "server": "queen-node", "version": a.cfg.Version,
		"worker_id": 0, "nodeId": a.b.ID(),
		"raft": map[string]any{
			"role": st.Role, "state": st.Role, "leader": st.LeaderID != "", "leaderId": st.LeaderID,
			"leaderHttp": nullable(st.LeaderHTTP), "leaderGrpc": nullable(st.LeaderGRPC),
			"term": st.Term, "applied": st.Applied, "commit": st.CommitIndex, "lag": lag,
			"stateApplied": st.StateApplied, "storageReady": st.StorageReady, "clusterVersion": st.ClusterVersion,
			"kinds": st.Kinds, "apply": map[string]any{"failure": nullable(st.ApplyFailure), "skipped": nonNilU(st.Skipped)},
			"damage": dmg, "resync": resync,
		},
		"groups":     a.b.GroupsStatus(), // every Raft group; "raft" is group 0's (issue 26)
		"tenant":     a.tenantHealth(r),
		"placements": placementsOut(a.b.Placements()),
		"load":       loadOut(a.b.Load()),
		"security":   map[string]any{"jwt": a.cfg.Auth != nil, "warnings": nonNil(a.cfg.SecurityWarnings)},
	})
}

// metricsJSON is GET /metrics: the 0.15 JSON snapshot.
func (a *API) metricsJSON(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	uptime := time.Since(a.started).Seconds()
	req := a.m.snapshotRequests()
	msgs := a.m.snapshotMessages()
	writeJSON(w, http.StatusOK, map[string]any{
		"uptime":   uptime,
		"requests": map[string]any{"total": req, "rate": float64(req) / max(uptime, 1)},
		"messages": map[string]any{"total": msgs, "rate": float64(msgs) / max(uptime, 1)},
		"database": map[string]any{"poolSize": 0, "idleConnections": 0, "waitingRequests": 0},
		"memory": map[string]any{"heapAlloc": ms.HeapAlloc, "heapSys": ms.HeapSys, "sys": ms.Sys,
			"numGC": ms.NumGC, "goroutines": runtime.NumGoroutine()},
		"cpu":  map[string]any{"cores": runtime.NumCPU()},
		"raft": a.b.Status(),
	})
}

// clusterView is GET /api/v1/system/cluster.
func (a *API) clusterView(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.b.Cluster())
}

// removeNode is DELETE /api/v1/system/cluster/nodes/:id: the operator's way
// to remove a voter that is gone for good (the cluster never does it on its
// own; see cluster/DESIGN.md).
func (a *API) removeNode(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.RequestTimeout)
	defer cancel()
	actor := ""
	if caller := identityOf(r); caller != nil {
		actor = caller.Sub
	}
	// The removal is a Raft configuration change; the leader records it in
	// the audit trail with an entry of its own.
	if err := a.b.RemoveServer(ctx, id, actor); err != nil {
		writeError(w, err)
		return
	}
	a.pipe.AuditLine(r.Context(), call(r, nil), "remove_voter", fmt.Sprintf("id=%q", id))
	writeJSON(w, http.StatusOK, map[string]any{"removed": true, "id": id})
}

func loadOut(l cluster.LoadStatus) map[string]any {
	return map[string]any{"inFlight": l.InFlight, "maxInflight": l.MaxInflight, "diskFreeBytes": l.DiskFreeBytes,
		"storageFull": l.DiskLow, "applyPaused": l.ApplyPaused}
}

// stateHash is GET /api/v1/system/state-hash: this node's digest of the
// replicated state at the entry it applied last, to compare replicas.
func (a *API) stateHash(w http.ResponseWriter, r *http.Request) {
	r, ok := a.groupParam(w, r)
	if !ok {
		return
	}
	applied, hash, err := a.b.StateHashIn(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodeId": a.b.ID(), "appliedIndex": applied, "hash": hash})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// auditTrail is GET /api/v1/system/audit?limit=&before=: the admin and
// destructive actions, newest first (package audit).
func (a *API) auditTrail(w http.ResponseWriter, r *http.Request) {
	limit := int(min(max(queryInt(r, "limit", 100), 1), 1000))
	before := uint64(max(queryInt(r, "before", 0), 0))
	var recs []*command.AuditRecord
	if err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error { recs = rd.Audit(before, limit); return nil }); err != nil {
		writeError(w, err)
		return
	}
	out := make([]map[string]any, len(recs))
	for i, rec := range recs {
		out[i] = map[string]any{"at": isoMillis(rec.AtUs), "actor": nullable(rec.Actor), "action": rec.Action,
			"detail": rec.Detail, "index": rec.Index}
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out})
}

func nonNilU(v []uint64) []uint64 {
	if v == nil {
		return []uint64{}
	}
	return v
}

// tenantHealth is where the request's tenant lives: its group and that
// group's leader (a client sends the tenant's writes there directly).
func (a *API) tenantHealth(r *http.Request) map[string]any {
	st := a.b.StatusOf(r.Context())
	return map[string]any{"name": tenant.From(r.Context()), "group": a.b.GroupFor(r.Context()), "leaderId": st.LeaderID,
		"leaderHttp": nullable(st.LeaderHTTP), "leaderGrpc": nullable(st.LeaderGRPC),
		// whether this node reads x-queen-tenant from a caller without a
		// tenant claim (--trust-tenant-header): the dashboard's picker
		"headerTrusted": a.cfg.TrustTenantHeader}
}

func placementsOut(p []cluster.Placement) []cluster.Placement {
	if p == nil {
		return []cluster.Placement{}
	}
	return p
}
