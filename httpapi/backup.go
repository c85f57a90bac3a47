package httpapi

import (
	"errors"
	"net/http"

	"github.com/queen-node/queen-node/cluster"
)

// GET /api/v1/system/backup streams a consistent backup of the cluster
// from this node (package backup has the format; `queen-node backup` saves
// and verifies it): of every Raft group, one record each, or of the one
// ?group=N names. POST /api/v1/system/restore installs a backup of one
// group (?group=N, or group 0) on that group's leader; elsewhere it
// answers 409 with the leader's HTTP address. `queen-node restore` sends a
// whole-cluster backup record by record.

// countingWriter notes whether the response has started.
type countingWriter struct {
	w       http.ResponseWriter
	written bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if !c.written {
		c.w.Header().Set("Content-Type", "application/octet-stream")
		c.w.Header().Set("Content-Disposition", `attachment; filename="queen-node.backup"`)
		c.written = true
	}
	return c.w.Write(p)
}

func (a *API) backup(w http.ResponseWriter, r *http.Request) {
	r, ok := a.groupParam(w, r)
	if !ok {
		return
	}
	cw := &countingWriter{w: w}
	h, err := a.b.Backup(r.Context(), cw, a.cfg.Version)
	if err != nil {
		if !cw.written {
			writeError(w, err)
			return
		}
		// The status is sent; a broken stream fails the file's checksum.
		a.log.Error("backup stream failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	a.log.Info("backup sent", "index", h.Index, "bytes", h.Size)
}

func (a *API) restore(w http.ResponseWriter, r *http.Request) {
	r, ok := a.groupParam(w, r)
	if !ok {
		return
	}
	h, index, err := a.b.Restore(r.Context(), r.Body)
	if errors.Is(err, cluster.ErrNotLeader) {
		leader := a.b.Cluster().Leader.HTTPAddr
		if _, named := cluster.GroupFrom(r.Context()); named {
			leader = a.b.StatusOf(r.Context()).LeaderHTTP
		}
		writeJSON(w, http.StatusConflict, map[string]any{"error": "a restore runs on the group's leader; send it to leaderHttp",
			"code": "not_leader", "leaderHttp": leader})
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"restored": true, "backupIndex": h.Index, "backupTakenAt": h.CreatedAt,
		"backupNodeId": h.NodeID, "logIndex": index})
}
