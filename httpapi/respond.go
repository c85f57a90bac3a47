package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/cluster"
)

// writeJSON writes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":"response does not encode"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type errorBody struct {
	Error  string `json:"error"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// writeError writes the spec's error envelope {"error": "..."}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// writeBackendError maps a node error to its status. Every 5xx here is one
// a client may retry: either nothing was applied, or the outcome is unknown
// and the request carries its own dedup (transactionId, lease, gate).
func writeBackendError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, cluster.ErrNoLeader):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "no leader: the cluster is electing one", Code: "no_leader"})
	case errors.Is(err, cluster.ErrNotLeader):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "this node cannot reach the leader", Code: "no_leader"})
	case errors.Is(err, cluster.ErrOutcomeUnknown):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "the outcome of this write is unknown: it may or may not have been applied; retry it", Code: "outcome_unknown"})
	case errors.Is(err, cluster.ErrTimeout):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "timed out before the write was proposed", Code: "timeout"})
	case errors.Is(err, cluster.ErrShutdown):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "the node is shutting down", Code: "shutting_down"})
	default:
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error(), Code: "internal"})
	}
}

// uuidString formats a 16-byte id; anything else as null.
func uuidString(b []byte) *string {
	if len(b) != 16 {
		return nil
	}
	s := uuid.UUID(b).String()
	return &s
}

func uuidOrEmpty(b []byte) string {
	if s := uuidString(b); s != nil {
		return *s
	}
	return ""
}

// isoMicros formats µs since the epoch as the pop route does.
func isoMicros(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// isoMillis formats µs since the epoch as the admin views do.
func isoMillis(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z")
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
