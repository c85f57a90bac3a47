package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/request"
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

// errorBody is the spec's error envelope {"error": "..."} with the machine
// fields of the KV and timer routes (reason, detail) and of engine errors
// (code, addendum §4.9).
type errorBody struct {
	Error  string `json:"error"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// writeError answers any failure with the status package request gives it.
func writeError(w http.ResponseWriter, err error) {
	e := request.FromError(err)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Kind.HTTPStatus(), errorBody{Error: e.Msg, Code: e.Code, Reason: e.Reason, Detail: e.Detail})
}

// notFound is the JSON 404 of an unknown route or a missing resource.
func notFound(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusNotFound, errorBody{Error: msg})
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

const microsLayout = "2006-01-02T15:04:05.000000Z"

// isoMicros formats µs since the epoch as the pop route does.
func isoMicros(us int64) string {
	return time.UnixMicro(us).UTC().Format(microsLayout)
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
