package dashboard_test

// Raft groups and tenants in a real browser: a real node (nodeproc) with
// --raft-groups 3, --trust-tenant-header and JWT on (and first one without
// --trust-tenant-header, where only a "*" token is offered the picker: an
// admin token without a tenant claim would have its header ignored). The
// landing page shows
// a row per group and the placement table as /health says them; the tenant
// picker lists the tenants of GET /api/v1/system/tenants, sends the one
// picked as x-queen-tenant (the queues page then lists that tenant's queues
// and not the default tenant's), and remembers it across a reload; a token
// whose claim is "*" picks too, and one whose claim names a tenant gets no
// picker and that tenant's queues.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/nodeproc"
)

// tenantToken is an HS256 admin token under jwtSecret whose tenant claim
// is tenant ("*" = every tenant).
func tenantToken(t *testing.T, sub, tenant string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(jwtSecret)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"sub": sub, "iss": authtest.Issuer, "aud": authtest.Audience, "role": "admin",
		"tenant": tenant, "exp": time.Now().Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// callTenant is call with an x-queen-tenant header ("" = none) and token
// ("" = the node's).
func callTenant(t *testing.T, ctx context.Context, n *nodeproc.Node, token, tenant, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token == "" {
		token = n.Token()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if tenant != "" {
		req.Header.Set("x-queen-tenant", tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s (tenant %q): %d %s", method, path, tenant, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type groupHealth struct {
	Groups []struct {
		Group  int    `json:"group"`
		Role   string `json:"role"`
		Term   uint64 `json:"term"`
		Leader string `json:"leader"`
	} `json:"groups"`
	Tenant struct {
		Name  string `json:"name"`
		Group int    `json:"group"`
	} `json:"tenant"`
	Placements []struct {
		Tenant  string `json:"tenant"`
		Group   int    `json:"group"`
		Pinned  bool   `json:"pinned"`
		Written bool   `json:"written"`
	} `json:"placements"`
}

func TestDashboardRaftGroupsAndTenantPicker(t *testing.T) {
	exe := needChromium(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kinds, err := authtest.Kinds(jwtSecret)
	if err != nil {
		t.Fatal(err)
	}
	var admin string // an admin token without a tenant claim: the default tenant's, an operator
	for _, k := range kinds {
		if k.Name == "admin" {
			admin = k.Token
		}
	}
	bin, err := nodeproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	star := tenantToken(t, "op", "*")
	start := func(id string, flags ...string) *nodeproc.Node {
		t.Helper()
		n, err := nodeproc.StartNode(ctx, nodeproc.Spec{Bin: bin, ID: id, DataDir: filepath.Join(t.TempDir(), id), Token: admin, Logf: t.Logf,
			Flags: append([]string{"--raft-groups", "3", "--jwt-enabled", "--jwt-algorithm", "HS256", "--jwt-secret", jwtSecret,
				"--jwt-issuer", authtest.Issuer, "--jwt-audience", authtest.Audience}, flags...)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Kill() })
		return n
	}
	// push pushes one message to queue of tenant ("" = the default) as
	// token ("" = the node's admin token).
	push := func(n *nodeproc.Node, token, tenant, queue string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var out []map[string]any
			callTenant(t, ctx, n, token, tenant, "POST", "/api/v1/push", map[string]any{"items": []any{
				map[string]any{"queue": queue, "payload": map[string]any{"tenant": tenant}}}}, &out)
			if len(out) == 1 && out[0]["status"] == "queued" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("push to %s of %q: %v", queue, tenant, out)
			}
			time.Sleep(200 * time.Millisecond) // the tenant's group still electing
		}
	}
	b := startBrowser(t, ctx, exe)

	// A node that does not trust the header: an admin token without a
	// tenant claim gets no picker (the header would be ignored), though
	// the node holds acme (written with a "*" token) and the token may list
	// the tenants; a "*" token gets it.
	u := start("u1")
	push(u, star, "acme", "a-only")
	push(u, "", "", "d-only")
	b.open(u.URL(), "#/queues")
	b.useToken(admin)
	b.waitSel(`[data-testid="queue-d-only"]`)
	if b.eval(`!!document.querySelector('#tenant-pick')`) != "false" {
		t.Errorf("on a node that does not trust x-queen-tenant, a token without a tenant claim is offered the picker")
	}
	if got := b.text(`[data-testid="tenant-name"]`); got != "default" {
		t.Errorf("on a node that does not trust the header the page says tenant %q", got)
	}
	b.useToken(star)
	b.waitSel(`#tenant-pick option[value="acme"]`)
	if err := u.Kill(); err != nil {
		t.Fatal(err)
	}

	// The node of the rest: it trusts the header. acme's queue, the default
	// tenant's, and a tenant pinned to group 2 before it writes.
	n := start("g1", "--trust-tenant-header")
	push(n, "", "acme", "a-only")
	push(n, "", "", "d-only")
	callTenant(t, ctx, n, "", "", "POST", "/api/v1/system/tenants/beta/pin", map[string]any{"group": 2}, nil)
	var h groupHealth
	callTenant(t, ctx, n, "", "acme", "GET", "/health", nil, &h)
	if len(h.Groups) != 3 || h.Tenant.Name != "acme" {
		t.Fatalf("/health for acme: %+v", h)
	}
	acmeGroup := h.Tenant.Group

	b.open(n.URL(), "#/cluster")
	b.waitFor("the page asks for a token", `document.querySelector('#banner').textContent.includes('401')`, 10*time.Second)
	b.useToken(admin)

	// A row per Raft group, as /health says them.
	b.waitFor("three group rows", `document.querySelectorAll('[data-testid^="raft-group-"]').length === 3`, 20*time.Second)
	callTenant(t, ctx, n, "", "", "GET", "/health", nil, &h)
	for _, g := range h.Groups {
		row := `[data-testid="raft-group-` + strconv.Itoa(g.Group) + `"]`
		for col, want := range map[string]string{"group": strconv.Itoa(g.Group), "role": g.Role, "leader": g.Leader} {
			if got := b.text(row + ` [data-col="` + col + `"]`); got != want {
				t.Errorf("group %d: %s shows %q, /health says %q", g.Group, col, got, want)
			}
		}
		if got := b.text(row + ` [data-col="term"]`); got != strconv.FormatUint(g.Term, 10) {
			t.Errorf("group %d: term shows %q, /health says %d", g.Group, got, g.Term)
		}
		for _, col := range []string{"applied", "commit"} {
			if got := b.text(row + ` [data-col="` + col + `"]`); got == "" || got == "—" {
				t.Errorf("group %d: %s shows %q", g.Group, col, got)
			}
		}
	}
	// The placement table: acme placed at its first write, beta pinned.
	b.waitSel(`[data-testid="placement-acme"]`)
	if got := b.text(`[data-testid="placement-acme"] [data-col="group"]`); got != strconv.Itoa(acmeGroup) {
		t.Errorf("placement of acme: group %q, /health says %d", got, acmeGroup)
	}
	if got := b.text(`[data-testid="placement-acme"] [data-col="how"]`); got != "first write" {
		t.Errorf("placement of acme: %q, want first write", got)
	}
	if got := b.text(`[data-testid="placement-beta"] [data-col="how"]`) + "/" + b.text(`[data-testid="placement-beta"] [data-col="group"]`); got != "pinned/2" {
		t.Errorf("placement of beta: %q, want pinned/2", got)
	}
	if got := b.text(`[data-testid="tenant-name"]`); got != "default" {
		t.Errorf("the page says it shows tenant %q, want default", got)
	}
	b.screenshot("cluster-groups")

	// The picker: the default tenant's queues, then acme's.
	b.waitSel(`#tenant-pick option[value="acme"]`)
	b.goTo("#/queues")
	b.waitSel(`[data-testid="queue-d-only"]`)
	if b.eval(`!!document.querySelector('[data-testid="queue-a-only"]')`) != "false" {
		t.Errorf("the default tenant's queues page lists acme's a-only")
	}
	pick := func(tenant string) {
		t.Helper()
		b.eval(`(s => { s.value = ` + strconv.Quote(tenant) + `; s.dispatchEvent(new Event('change', { bubbles: true })); return s.value; })(document.querySelector('#tenant-pick'))`)
	}
	pick("acme")
	b.waitSel(`[data-testid="queue-a-only"]`)
	if b.eval(`!!document.querySelector('[data-testid="queue-d-only"]')`) != "false" {
		t.Errorf("acme's queues page lists the default tenant's d-only")
	}
	b.waitFor("the page says acme", `document.querySelector('[data-testid="tenant-name"]').textContent === 'acme'`, 10*time.Second)
	if got := b.text(`[data-testid="tenant-group"]`); got != strconv.Itoa(acmeGroup) {
		t.Errorf("acme's group shows %q, want %d", got, acmeGroup)
	}
	if got := b.eval(`localStorage.getItem('queen.dashboard.tenant')`); got != "acme" {
		t.Errorf("localStorage keeps %q", got)
	}
	b.screenshot("queues-tenant-acme")
	// Remembered: a reload shows acme's queues again.
	b.open(n.URL(), "#/queues")
	b.waitSel(`[data-testid="queue-a-only"]`)
	if got := b.eval(`document.querySelector('#tenant-pick').value`); got != "acme" {
		t.Errorf("after a reload the picker says %q", got)
	}
	// On the landing page acme's group is marked.
	b.goTo("#/cluster")
	b.waitSel(`[data-testid="raft-group-` + strconv.Itoa(acmeGroup) + `"].sel`)
	// Back to the default tenant.
	b.goTo("#/queues")
	pick("")
	b.waitSel(`[data-testid="queue-d-only"]`)
	if b.eval(`!!document.querySelector('[data-testid="queue-a-only"]')`) != "false" {
		t.Errorf("back on the default tenant, the queues page lists a-only")
	}

	// A token of every tenant ("*"): it picks too; "every tenant" lists both.
	b.useToken(star)
	b.waitFor("the page names the * token", `(document.querySelector('[data-testid="tenant-source"]')||{}).textContent === '(token: every tenant)'`, 10*time.Second)
	b.waitSel(`#tenant-pick option[value="acme"]`)
	b.waitSel(`[data-testid="queue-d-only"]`)
	if b.eval(`!!document.querySelector('[data-testid="queue-a-only"]')`) != "false" {
		t.Errorf("with a * token and no pick (the default tenant), the queues page lists a-only")
	}
	pick("acme")
	b.waitSel(`[data-testid="queue-a-only"]`)
	if b.eval(`!!document.querySelector('[data-testid="queue-d-only"]')`) != "false" {
		t.Errorf("with a * token picking acme, the queues page lists d-only")
	}
	if got := b.text(`[data-testid="tenant-group"]`); got != strconv.Itoa(acmeGroup) {
		t.Errorf("with a * token, acme's group shows %q, want %d", got, acmeGroup)
	}

	// A token whose claim is acme: no picker, acme's queues whatever was
	// picked before.
	b.useToken(tenantToken(t, "acme-admin", "acme"))
	b.waitFor("the page names acme's token", `(document.querySelector('[data-testid="tenant-source"]')||{}).textContent === '(token)' && document.querySelector('[data-testid="tenant-name"]').textContent === 'acme'`, 10*time.Second)
	b.waitSel(`[data-testid="queue-a-only"]`)
	if b.eval(`!!document.querySelector('#tenant-pick')`) != "false" {
		t.Errorf("a token whose claim names acme is offered the picker")
	}
	if b.eval(`!!document.querySelector('[data-testid="queue-d-only"]')`) != "false" {
		t.Errorf("acme's token sees d-only")
	}
	t.Logf("groups and tenants browser test took %v (screenshots in %s)", time.Since(began).Round(time.Millisecond), b.shot)
}
