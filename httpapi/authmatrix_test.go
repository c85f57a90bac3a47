package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/httpapi"
)

// The auth matrix (issue 14): every route × every kind of token. A token
// that is missing, expired, badly signed, unsigned (alg none), from
// another issuer or for another audience gets 401; a role below the
// route's level gets 403; and a refused call changes nothing (the state
// hash before and after).
func TestAuthMatrixOfEveryRoute(t *testing.T) {
	l := startLiveWithJWT(t, auth.Config{Issuer: "queen", Audience: "brokers"})
	ok := map[string]any{"iss": "queen", "aud": "brokers"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, x := range ok {
			m[k] = x
		}
		for k, x := range extra {
			m[k] = x
		}
		return m
	}
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	pl, _ := json.Marshal(with(map[string]any{"sub": "x", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()}))
	unsigned := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(pl) + "."
	kinds := []struct {
		name   string
		header string
		role   string // "" = refused with 401
	}{
		{"no token", "", ""},
		{"expired", "Bearer " + token(t, "x", with(map[string]any{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()})), ""},
		{"bad signature", "Bearer " + token(t, "x", with(map[string]any{"role": "admin"})) + "A", ""},
		{"alg none", "Bearer " + unsigned, ""},
		{"wrong issuer", "Bearer " + token(t, "x", with(map[string]any{"role": "admin", "iss": "evil"})), ""},
		{"wrong audience", "Bearer " + token(t, "x", with(map[string]any{"role": "admin", "aud": "others"})), ""},
		{"read-only", "Bearer " + token(t, "ro", with(map[string]any{"role": "read-only"})), "read-only"},
		{"write-only", "Bearer " + token(t, "wo", with(map[string]any{"role": "write-only"})), "write-only"},
		{"read-write", "Bearer " + token(t, "rw", with(map[string]any{"role": "read-write"})), "read-write"},
		{"admin", "Bearer " + token(t, "ad", with(map[string]any{"role": "admin"})), "admin"},
	}
	param := regexp.MustCompile(`\{[a-zA-Z]+(\.\.\.)?\}`)
	hash := func() string {
		idx, h, err := l.node.StateHash()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h, "@", idx)
	}
	routes := httpapi.New(httpapi.Config{}).Routes()
	checked := 0
	for _, pattern := range routes {
		method, path, _ := strings.Cut(pattern, " ")
		if path == "" || path == "/" || path == "/api/" {
			continue
		}
		level, producer := httpapi.RouteAccess(pattern)
		path = param.ReplaceAllString(path, "x")
		for _, k := range kinds {
			before := hash()
			hdr := map[string]string{}
			if k.header != "" {
				hdr["Authorization"] = k.header
			}
			body := ""
			if method == "POST" || method == "PUT" {
				body = `{}`
			}
			code, b, _ := l.doH(method, path, body, hdr)
			again := func() { l.doH(method, path, body, hdr) }
			var want int // 0 = let in (any answer but 401/403)
			switch {
			case level == auth.Public:
			case k.role == "":
				want = 401
			case !authtest.Allows(k.role, level, producer):
				want = 403
			}
			switch {
			case want == 0 && (code == 401 || code == 403):
				t.Errorf("%s as %s: %d %s, want it let in", pattern, k.name, code, b)
			case want != 0 && code != want:
				t.Errorf("%s as %s: %d %s, want %d", pattern, k.name, code, b, want)
			case want != 0 && !authtest.Unchanged(hash, before, again):
				t.Errorf("%s as %s: refused with %d but the state changed", pattern, k.name, code)
			}
			checked++
		}
	}
	if checked < 40*len(kinds) {
		t.Fatalf("only %d calls checked", checked)
	}
	t.Logf("%d routes × %d kinds of token = %d calls checked", checked/len(kinds), len(kinds), checked)
}

// The levels themselves, as spec §3 and the issue state them: the admin
// routes, the read-only ones, and write-only reaching push and timer
// schedules only. (The matrix above checks that the levels are enforced.)
func TestRouteLevelsAreTheSpecs(t *testing.T) {
	admin := []string{"DELETE /api/v1/resources/queues/{queue}", "DELETE /api/v1/consumer-groups/{group}",
		"DELETE /api/v1/consumer-groups/{group}/queues/{queue}", "POST /api/v1/stats/refresh",
		"GET /api/v1/system/maintenance", "POST /api/v1/system/maintenance", "GET /api/v1/system/maintenance/pop",
		"POST /api/v1/system/maintenance/pop", "GET /api/v1/system/kv-timers", "POST /api/v1/system/kv-timers",
		"DELETE /api/v1/system/cluster/nodes/{id}", "GET /api/v1/system/backup", "POST /api/v1/system/restore",
		"GET /api/v1/system/audit"}
	readOnly := []string{"GET /api/v1/resources/queues", "GET /api/v1/resources/queues/{queue}", "GET /api/v1/dlq",
		"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging", "GET /api/v1/consumer-groups/{group}",
		"GET /api/v1/kv/{ns}/{key...}", "GET /api/v1/timers/{queue}", "GET /api/v1/timers/{queue}/{timerKey...}"}
	readWrite := []string{"POST /api/v1/push", "GET /api/v1/pop/queue/{queue}", "POST /api/v1/ack", "POST /api/v1/ack/batch",
		"POST /api/v1/transaction", "POST /api/v1/configure", "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"POST /api/v1/kv", "PUT /api/v1/kv/{ns}/{key...}", "DELETE /api/v1/timers/{queue}/{timerKey...}"}
	for _, group := range []struct {
		level auth.Level
		list  []string
	}{{auth.Admin, admin}, {auth.ReadOnly, readOnly}, {auth.ReadWrite, readWrite}} {
		for _, p := range group.list {
			if l, _ := httpapi.RouteAccess(p); l != group.level {
				t.Errorf("%s: level %d, want %d", p, l, group.level)
			}
		}
	}
	for _, p := range httpapi.New(httpapi.Config{}).Routes() {
		_, producer := httpapi.RouteAccess(p)
		if producer != (p == "POST /api/v1/push" || p == "POST /api/v1/timers") {
			t.Errorf("%s: producer route %v", p, producer)
		}
	}
}
