package httpapi

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/request"
)

// The wire decoding of request bodies: JSON as the spec spells it. Member
// names match exactly (Queen and its clients spell keys exactly; a key of
// another case is an unknown member, which the spec ignores), a name given
// twice or text that is not UTF-8 is invalid JSON, and every member's JSON
// type is checked here with the spec's texts. The rules of what the values
// may be are package request's.

const msgEmptyBody = "Empty request body"

// readBody reads the whole body within the size limit: 413 past it, 400
// when empty.
func (a *API) readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &request.Error{Kind: request.TooLarge,
				Msg: "Request body too large (limit " + strconv.FormatInt(a.cfg.MaxBodyBytes, 10) + " bytes)"}
		}
		return nil, request.Bad("Could not read request body: " + err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, request.Bad(msgEmptyBody)
	}
	return body, nil
}

// object is a decoded JSON object whose members are still raw.
type object map[string]jsontext.Value

// readObject reads the body as a JSON object.
func (a *API) readObject(r *http.Request) (object, error) {
	body, err := a.readBody(r)
	if err != nil {
		return nil, err
	}
	return parseObject(body)
}

// parseObject decodes a body that must be one JSON object.
func parseObject(body []byte) (object, error) {
	if kindOf(body) != '{' {
		if err := checkJSON(body); err != nil {
			return nil, err
		}
		return nil, request.Bad("Request body must be a JSON object")
	}
	var o object
	if err := unmarshal(body, &o); err != nil {
		return nil, request.Bad("Invalid JSON: " + err.Error())
	}
	return o, nil
}

// checkJSON refuses a body that is not one JSON value.
func checkJSON(body []byte) error {
	var v jsontext.Value
	if err := unmarshal(body, &v); err != nil {
		return request.Bad("Invalid JSON: " + err.Error())
	}
	return nil
}

// unmarshal decodes JSON the way every body is decoded here.
func unmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

// kindOf is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n',
// or a number's first character; 0 for nothing.
func kindOf(raw []byte) byte {
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
func present(raw jsontext.Value) bool {
	return raw != nil && kindOf(raw) != 'n'
}

// str decodes a JSON string member. The common case (no escapes) is a
// slice of text already checked to be valid JSON, not a parse.
func str(raw jsontext.Value) (string, bool) {
	if kindOf(raw) != '"' {
		return "", false
	}
	if t := bytes.TrimSpace(raw); len(t) >= 2 && t[len(t)-1] == '"' && bytes.IndexByte(t[1:len(t)-1], '\\') < 0 &&
		bytes.IndexByte(t[1:len(t)-1], '"') < 0 && utf8.Valid(t) {
		return string(t[1 : len(t)-1]), true
	}
	var s string
	if err := unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// integer decodes a JSON number with an integral value.
func integer(raw jsontext.Value) (int64, bool) {
	c := kindOf(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	t := string(bytes.TrimSpace(raw))
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return i, true
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, false
	}
	return int64(v), true
}

// number decodes any JSON number.
func number(raw jsontext.Value) (float64, bool) {
	c := kindOf(raw)
	if c != '-' && (c < '0' || c > '9') {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	return v, err == nil
}

func boolean(raw jsontext.Value) (bool, bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// array decodes a JSON array member into raw elements.
func array(raw jsontext.Value) ([]jsontext.Value, bool) {
	if kindOf(raw) != '[' {
		return nil, false
	}
	var out []jsontext.Value
	if err := unmarshal(raw, &out); err != nil {
		return nil, false
	}
	return out, true
}

// asObject decodes a raw member as an object.
func asObject(raw []byte) (object, bool) {
	if kindOf(raw) != '{' {
		return nil, false
	}
	var o object
	if err := unmarshal(raw, &o); err != nil {
		return nil, false
	}
	return o, true
}

// opsOf reads a body of ops, a bare array or {"operations":[...]} (the KV
// and timer routes); notArray refuses an operations member that is no array.
func opsOf(body []byte, notArray error) ([]jsontext.Value, error) {
	if kindOf(body) == '[' {
		var raws []jsontext.Value
		if err := unmarshal(body, &raws); err != nil {
			return nil, request.Bad("Invalid JSON: " + err.Error())
		}
		return raws, nil
	}
	o, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	raws, ok := array(o["operations"])
	if !ok {
		return nil, notArray
	}
	return raws, nil
}

// eachOp decodes every element of an ops array, which must be an object
// (notObject refuses one that is not).
func eachOp[T any](raws []jsontext.Value, notObject func(i int) error, decode func(i int, o object) (T, error)) ([]T, error) {
	out := make([]T, 0, len(raws))
	for i, raw := range raws {
		o, ok := asObject(raw)
		if !ok {
			return nil, notObject(i)
		}
		v, err := decode(i, o)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// optString decodes an optional string member: absent and null are "",
// anything but a string is the error msg.
func optString(raw jsontext.Value, msg string) (string, error) {
	if !present(raw) {
		return "", nil
	}
	s, ok := str(raw)
	if !ok {
		return "", request.Bad(msg)
	}
	return s, nil
}

// Query parsing (spec §1.1): booleans are true only for "true" or "1";
// integers that do not parse fall back to the default.
func queryBool(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "true" || v == "1"
}

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
