package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/dashboard"
)

// The handler: the page and its files under /dashboard/, a redirect from
// /dashboard, GET and HEAD only, a policy that lets the page load nothing
// from elsewhere, and every other path handed on.
func TestWrapServesTheDashboardAndHandsOnTheRest(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api:"+r.URL.Path) })
	srv := httptest.NewServer(dashboard.Wrap(next))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := get("GET", "/dashboard")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "dashboard/" {
		t.Fatalf("/dashboard: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := get("GET", "/dashboard/")
	if resp.StatusCode != 200 || !strings.Contains(body, `<script src="app.js">`) {
		t.Fatalf("/dashboard/: %d %.200s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("policy: %q", csp)
	}
	for path, ctype := range map[string]string{"/dashboard/app.js": "javascript", "/dashboard/style.css": "text/css"} {
		resp, body := get("GET", path)
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("%s: %d %q %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if resp, _ := get("POST", "/dashboard/app.js"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	if resp, _ := get("GET", "/dashboard/nope.js"); resp.StatusCode != 404 {
		t.Errorf("a missing file: %d", resp.StatusCode)
	}
	for _, path := range []string{"/api/v1/status", "/dashboardx", "/health", "/"} {
		if _, body := get("GET", path); body != "api:"+path {
			t.Errorf("%s reached %q", path, body)
		}
	}
}

// Nothing the page loads comes from another origin: no http(s) URL in its
// files but the comments', no CDN.
func TestAssetsLoadNothingFromElsewhere(t *testing.T) {
	srv := httptest.NewServer(dashboard.Handler())
	defer srv.Close()
	for _, f := range []string{"index.html", "app.js", "style.css"} {
		resp, err := http.Get(srv.URL + "/dashboard/" + f)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			code := strings.TrimSpace(line)
			if strings.HasPrefix(code, "//") || strings.HasPrefix(code, "/*") || strings.HasPrefix(code, "*") {
				continue
			}
			if strings.Contains(code, "http://") || strings.Contains(code, "https://") || strings.Contains(code, "//cdn") {
				t.Errorf("%s loads from elsewhere: %s", f, code)
			}
		}
	}
}
