package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

const msgEmptyBody = "Empty request body"

// Input limits [ours]. Names are joined with 0x00 in the state's keys, so a
// NUL is refused in every name.
const (
	maxNameBytes  = 512
	maxTxnIDBytes = 1024
)

// badRequest is a 4xx the decoder answers with; nothing has been applied.
type badRequest struct {
	status int
	msg    string
	reason string
	detail string
}

func (e *badRequest) Error() string { return e.msg }

func bad(msg string) error { return &badRequest{status: http.StatusBadRequest, msg: msg} }

// writeDecodeError writes a decoder error.
func writeDecodeError(w http.ResponseWriter, err error) {
	status, body := decodeErrorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// decodeErrorBody renders a decoder error as its status and JSON body.
func decodeErrorBody(err error) (int, []byte) {
	var br *badRequest
	eb := errorBody{Error: err.Error()}
	status := http.StatusBadRequest
	if errors.As(err, &br) {
		status, eb = br.status, errorBody{Error: br.msg, Reason: br.reason, Detail: br.detail}
	}
	b, _ := json.Marshal(eb)
	return status, append(b, '\n')
}

// readBody reads the whole body within the size limit: 413 past it, 400
// when empty.
func (a *API) readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &badRequest{status: http.StatusRequestEntityTooLarge,
				msg: "Request body too large (limit " + strconv.FormatInt(a.cfg.MaxBodyBytes, 10) + " bytes)"}
		}
		return nil, bad("Could not read request body: " + err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bad(msgEmptyBody)
	}
	return body, nil
}

// object is a decoded JSON object whose members are still raw.
type object map[string]json.RawMessage

// readObject reads the body as a JSON object.
func (a *API) readObject(r *http.Request) (object, error) {
	body, err := a.readBody(r)
	if err != nil {
		return nil, err
	}
	return parseObject(body)
}

func parseObject(body []byte) (object, error) {
	var raw json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, bad("Invalid JSON: " + err.Error())
	}
	if firstByte(raw) != '{' {
		return nil, bad("Request body must be a JSON object")
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, bad("Invalid JSON: " + err.Error())
	}
	return o, nil
}

func firstByte(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// present reports whether a member was sent with a non-null value.
func present(raw json.RawMessage) bool {
	return raw != nil && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// str decodes a JSON string member. The common case (no escapes, already
// valid JSON from the decoder that produced raw) is a slice, not a parse.
func str(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '"' {
		return "", false
	}
	if t := bytes.TrimSpace(raw); len(t) >= 2 && t[len(t)-1] == '"' && bytes.IndexByte(t[1:len(t)-1], '\\') < 0 &&
		bytes.IndexByte(t[1:len(t)-1], '"') < 0 && utf8.Valid(t) {
		return string(t[1 : len(t)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// integer decodes a JSON number with an integral value.
func integer(raw json.RawMessage) (int64, bool) {
	c := firstByte(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	var f json.Number
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false
	}
	if i, err := f.Int64(); err == nil {
		return i, true
	}
	v, err := f.Float64()
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, false
	}
	return int64(v), true
}

// number decodes any JSON number.
func number(raw json.RawMessage) (float64, bool) {
	c := firstByte(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false
	}
	return f, true
}

func boolean(raw json.RawMessage) (bool, bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// array decodes a JSON array member into raw elements.
func array(raw json.RawMessage) ([]json.RawMessage, bool) {
	if firstByte(raw) != '[' {
		return nil, false
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, false
	}
	return out, true
}

// asObject decodes a raw member as an object.
func asObject(raw json.RawMessage) (object, bool) {
	if firstByte(raw) != '{' {
		return nil, false
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, false
	}
	return o, true
}

// checkName refuses names the state cannot key.
func checkName(what, s string) error {
	if len(s) > maxNameBytes {
		return bad(what + " is too long (max " + strconv.Itoa(maxNameBytes) + " bytes)")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return bad(what + " must not contain NUL characters")
	}
	if !utf8.ValidString(s) {
		return bad(what + " must be valid UTF-8")
	}
	return nil
}

// Query parsing (spec §1.1): booleans are true only for "true" or "1";
// integers that do not parse fall back to the default.
func queryBool(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "true" || v == "1"
}

// maxSeconds bounds every duration given in seconds (about 100 years), so
// that µs arithmetic on entry times can never overflow.
const maxSeconds = 100 * 365 * 24 * 3600

func queryInt(r *http.Request, name string, def int64) int64 {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return i
}
