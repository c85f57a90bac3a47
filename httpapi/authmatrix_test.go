package httpapi_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

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
	l := startLiveWithJWT(t, auth.Config{Issuer: authtest.Issuer, Audience: authtest.Audience})
	kinds, err := authtest.Kinds(testSecret)
	if err != nil {
		t.Fatal(err)
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
			if k.Token != "" {
				hdr["Authorization"] = "Bearer " + k.Token
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
			case k.Role == "":
				want = 401
			case !authtest.Allows(k.Role, level, producer):
				want = 403
			}
			switch {
			case want == 0 && (code == 401 || code == 403):
				t.Errorf("%s as %s: %d %s, want it let in", pattern, k.Name, code, b)
			case want != 0 && code != want:
				t.Errorf("%s as %s: %d %s, want %d", pattern, k.Name, code, b, want)
			case want != 0 && !authtest.Unchanged(hash, before, again):
				t.Errorf("%s as %s: refused with %d but the state changed", pattern, k.Name, code)
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
		"GET /api/v1/system/audit", "DELETE /api/v1/dlq"}
	readOnly := []string{"GET /api/v1/resources/queues", "GET /api/v1/resources/queues/{queue}", "GET /api/v1/dlq", "POST /api/v1/kv",
		"GET /api/v1/consumer-groups", "GET /api/v1/consumer-groups/lagging", "GET /api/v1/consumer-groups/{group}",
		"GET /api/v1/kv/{ns}/{key...}", "GET /api/v1/timers/{queue}", "GET /api/v1/timers/{queue}/{timerKey...}",
		"GET /api/v1/messages", "GET /api/v1/messages/{partitionId}/{transactionId}", "GET /api/v1/traces/names",
		"GET /api/v1/traces/by-name/{name}", "GET /api/v1/traces/{partitionId}/{transactionId}",
		"GET /api/v1/status", "GET /api/v1/status/queues", "GET /api/v1/status/queues/{queue}",
		"GET /api/v1/status/queues/{queue}/messages", "GET /api/v1/status/analytics", "GET /api/v1/status/buffers",
		"GET /api/v1/analytics/queue-lag", "GET /api/v1/analytics/queue-ops", "GET /api/v1/analytics/retention",
		"GET /api/v1/analytics/system-metrics", "GET /api/v1/analytics/worker-metrics",
		"GET /api/v1/analytics/queue-parked-replicas", "GET /api/v1/analytics/postgres-stats"}
	readWrite := []string{"POST /api/v1/push", "GET /api/v1/pop/queue/{queue}", "POST /api/v1/ack", "POST /api/v1/ack/batch",
		"POST /api/v1/transaction", "POST /api/v1/configure", "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
		"PUT /api/v1/kv/{ns}/{key...}", "DELETE /api/v1/timers/{queue}/{timerKey...}",
		"DELETE /api/v1/messages/{partitionId}/{transactionId}", "POST /api/v1/messages/{partitionId}/{transactionId}/retry",
		"POST /api/v1/dlq/{id}/replay", "POST /api/v1/traces",
		"POST /api/v1/locks"}
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
