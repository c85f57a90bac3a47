package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/pipeline"
)

// The checks of an answer: its status, its body, auth, and no write on a
// 4xx.

func (f *fuzzer) kindOf(name string) tokenKind {
	for _, k := range f.tok.kinds {
		if k.name == name {
			return k
		}
	}
	return tokenKind{name: name}
}

// netHTTP400 is net/http's own refusal of a request it cannot parse (a
// request line or header it refuses): plain text, before any handler.
func netHTTP400(r *resp) bool {
	return r.Status == 400 && strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") &&
		bytes.HasPrefix(r.Body, []byte("400 Bad Request"))
}

// allowed503 are the codes of the documented 503s (spec §1.2 and §4.7,
// addendum §4.4 and §4.9; request/errors.go and request/verdicts.go), each
// with Retry-After.
var allowed503 = map[string]string{
	"no_leader":       "",
	"retry":           "",
	"outcome_unknown": "",
	"timeout":         "",
	"shutting_down":   "",
	"kv_disabled":     "kv",
	"timers_disabled": "timers",
}

// bodyOf is resp's body; for a HEAD, which has none, the body of the same
// request sent as a GET (HEAD reaches the GET route, a read), so that its
// 503's code can be read.
func (f *fuzzer) bodyOf(r *req, resp *resp) []byte {
	if r.Method != http.MethodHead || len(resp.Body) > 0 {
		return resp.Body
	}
	get := *r
	get.Method = http.MethodGet
	if again, err := f.c.do(&get, 10*time.Second); err == nil && again.Status == resp.Status {
		return again.Body
	}
	return resp.Body
}

// checkStatus: no 5xx but the documented 503s.
func (f *fuzzer) checkStatus(r *req, pattern string, resp *resp) {
	if resp.Status < 500 {
		return
	}
	if resp.Status == 503 {
		if pattern == "GET /health" {
			f.rep.Allowed503++ // unhealthy: alive() watches it
			return
		}
		var body struct {
			Error *string `json:"error"`
			Code  string  `json:"code"`
		}
		json.Unmarshal(f.bodyOf(r, resp), &body)
		route, known := allowed503[body.Code]
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		switch {
		case !known:
			f.fail(fail5xx, r, resp, "503 with code "+strconv.Quote(body.Code)+", not a documented one")
		case ra <= 0:
			f.fail(fail5xx, r, resp, "503 without a Retry-After")
		case route == "kv" && !strings.Contains(pattern, " /api/v1/kv") && pattern != "POST /api/v1/locks":
			f.fail(fail5xx, r, resp, "kv_disabled outside the KV and lock routes")
		case route == "timers" && pattern != "POST /api/v1/timers":
			f.fail(fail5xx, r, resp, "timers_disabled outside POST /api/v1/timers")
		default:
			f.rep.Allowed503++
			f.rep.Codes503[body.Code]++
		}
		return
	}
	f.fail(fail5xx, r, resp, "")
}

// checkBody: every error answer is JSON with an "error" string; a 2xx of
// the API is JSON (204 and HEAD: no body; the Prometheus text and the
// backup file are not JSON).
func (f *fuzzer) checkBody(r *req, pattern string, resp *resp) {
	if r.Method == "HEAD" {
		return
	}
	if resp.Status >= 400 {
		var body map[string]any
		if err := json.Unmarshal(resp.Body, &body); err != nil {
			f.fail(failErrorBody, r, resp, "not a JSON object: "+err.Error())
			return
		}
		if _, isStr := body["error"].(string); !isStr {
			f.fail(failErrorBody, r, resp, `no "error" string`)
		}
		return
	}
	if resp.Status/100 != 2 || resp.Status == 204 || r.Method == "OPTIONS" {
		return
	}
	if pattern == "GET /metrics/prometheus" || pattern == "GET /api/v1/system/backup" {
		return
	}
	if !json.Valid(resp.Body) {
		f.fail(failBody2xx, r, resp, "not JSON")
	}
}

// skipPaths are the node's JWT_SKIP_PATHS (the default): served without a
// token whatever their route.
var skipPaths = map[string]bool{"/health": true, "/metrics/prometheus": true, "/metrics": true, "/": true}

// checkAuth holds the answer to what the token allows on the route the
// request reached: an invalid token 401, a role below the route 403. It
// reports whether the request was refused by auth.
func (f *fuzzer) checkAuth(r *req, pattern, path string, kind tokenKind, resp *resp) bool {
	if pattern == "" || r.Method == "OPTIONS" || skipPaths[path] {
		return false
	}
	acc := pipeline.RouteAccess(pattern)
	level, producer := acc.Level, acc.Producer
	if level == auth.Public {
		return false
	}
	switch {
	case kind.exp == expect401:
		f.rep.AuthChecks++
		if resp.Status != 401 {
			f.fail(failAuth, r, resp, "token "+strconv.Quote(kind.name)+" on "+pattern+": want 401")
		}
		return true
	case kind.exp == expectRole && !authtest.Allows(kind.role, level, producer):
		f.rep.AuthChecks++
		if resp.Status != 403 {
			f.fail(failAuth, r, resp, "role "+strconv.Quote(kind.role)+" on "+pattern+": want 403")
		}
		return true
	}
	return false
}

// hash is the node's state hash and applied index ("" when it cannot be
// read).
func (f *fuzzer) hash() string {
	r := build("GET /api/v1/system/state-hash", base{})
	r.Header = append(r.Header, []string{"Authorization", f.tok.admin})
	defer func(t time.Time) { f.rep.HashTime += time.Since(t) }(time.Now())
	for range 3 {
		resp, err := f.probe.do(r, 10*time.Second)
		if err != nil || resp.Status != 200 {
			continue
		}
		var h struct {
			Applied uint64 `json:"appliedIndex"`
			Hash    string `json:"hash"`
		}
		if json.Unmarshal(resp.Body, &h) == nil && h.Hash != "" {
			f.lastRead = h.Hash + "@" + strconv.FormatUint(h.Applied, 10)
			return f.lastRead
		}
	}
	return ""
}

// checkUnchanged: a 4xx changed nothing. The node's own entries (sweeps,
// timer steps) may land meanwhile, so a changed hash is looked at again
// the way the auth matrices do (authtest.Unchanged): the request is sent
// again until a window shows no change, five times at most.
func (f *fuzzer) checkUnchanged(r *req, resp *resp, before string) {
	f.rep.Checked4xx++
	var answers []int
	again := func() {
		timeout, _ := timeoutOf(r)
		if x, err := f.do(r, timeout); err == nil {
			answers = append(answers, x.Status)
		}
	}
	hash := func() string {
		if h := f.hash(); h != "" {
			return h
		}
		return before // unreadable: no claim
	}
	if authtest.Unchanged(hash, before, again) {
		return
	}
	after := f.hash()
	f.fail(failWrite, r, resp, fmt.Sprintf("the state hash moved in every window (before %s, now %s; the repeats answered %v)%s",
		before, after, answers, f.auditSince(before)))
}

// auditSince names the audit records written after the applied index of
// the hash reading before (what a refused request may have recorded).
func (f *fuzzer) auditSince(before string) string {
	_, idx, _ := strings.Cut(before, "@")
	from, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return ""
	}
	r := build("GET /api/v1/system/audit", base{query: [][2]string{{"limit", "10"}}})
	r.Header = append(r.Header, []string{"Authorization", f.tok.admin})
	resp, err := f.probe.do(r, 10*time.Second)
	if err != nil || resp.Status != 200 {
		return ""
	}
	var a struct {
		Records []struct {
			Action string `json:"action"`
			Detail string `json:"detail"`
			Index  uint64 `json:"index"`
		} `json:"records"`
	}
	json.Unmarshal(resp.Body, &a)
	var recs []string
	for _, rec := range a.Records {
		if rec.Index > from {
			recs = append(recs, fmt.Sprintf("%s %s @%d", rec.Action, rec.Detail, rec.Index))
		}
	}
	if len(recs) == 0 {
		return ""
	}
	return "; audit records written meanwhile: " + strings.Join(recs, ", ")
}
