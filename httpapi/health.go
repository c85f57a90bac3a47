package httpapi

import (
	"context"
	"github.com/queen-node/queen-node/cluster"
	"net/http"
	"runtime"
	"time"
)

// health is GET /health: 200 when this node can serve writes (it leads or
// knows a leader), 503 otherwise, with the Raft view of addendum §4.13.
func (a *API) health(w http.ResponseWriter, r *http.Request) {
	st := a.b.Status()
	ok := a.b.Ready()
	status, code := "healthy", http.StatusOK
	if !ok {
		status, code = "unhealthy", http.StatusServiceUnavailable
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
			"term": st.Term, "applied": st.Applied, "commit": st.CommitIndex, "lag": lag,
			"stateApplied": st.StateApplied,
		},
		"load":     loadOut(a.b.Load()),
		"security": map[string]any{"jwt": a.cfg.Auth != nil, "warnings": nonNil(a.cfg.SecurityWarnings)},
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
	if err := a.b.RemoveServer(ctx, id); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"removed": true, "id": id})
}

func loadOut(l cluster.LoadStatus) map[string]any {
	return map[string]any{"inFlight": l.InFlight, "maxInflight": l.MaxInflight, "diskFreeBytes": l.DiskFreeBytes,
		"storageFull": l.DiskLow, "applyPaused": l.ApplyPaused}
}

// stateHash is GET /api/v1/system/state-hash: this node's digest of the
// replicated state at the entry it applied last, to compare replicas.
func (a *API) stateHash(w http.ResponseWriter, r *http.Request) {
	applied, hash, err := a.b.StateHash()
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
