package httpapi_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/pipeline"
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
		acc := pipeline.RouteAccess(pattern)
		level, producer := acc.Level, acc.Producer
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
