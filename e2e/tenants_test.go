package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/tenant"
)

// Tenants across a three-node cluster (issue 26): with
// --trust-tenant-header the x-queen-tenant header names a request's
// tenant; the same queue and KV names in two tenants are two queues and two
// entries, over HTTP and gRPC, through followers that forward to the
// leader (pops long-polling, the exactly-once transaction, linearizable KV
// reads).
func TestTenantsAcrossACluster(t *testing.T) {
	c := startCluster(t, nodeOpts{Extra: []string{"--trust-tenant-header", "--default-subscription-mode", "all"}})
	leader := c.leader(20 * time.Second)
	followers := c.others(leader)
	a, b := followers[0], followers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	client := func(n *node, grpc bool, tenantName string) *queen.Client {
		target, opts := n.URL(), []queen.Option{queen.WithLeaderRouting(false)}
		if grpc {
			target = "grpc://" + n.Addrs().GRPC
		}
		if tenantName != "" {
			opts = append(opts, queen.WithTenant(tenantName))
		}
		cl, err := queen.New(target, opts...)
		must(t, err)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	acmeHTTP, acmeGRPC := client(a, false, "acme"), client(b, true, "acme")
	defHTTP, betaGRPC := client(b, false, ""), client(a, true, "beta")

	_, err := acmeHTTP.Queue("orders").Push(ctx, queen.Msg{Data: map[string]string{"who": "acme"}, TransactionID: "o-1"})
	must(t, err)
	_, err = defHTTP.Queue("orders").Push(ctx, queen.Msg{Data: map[string]string{"who": "default"}, TransactionID: "o-1"})
	must(t, err)

	// acme's consumer, on the other follower over gRPC, long-polls its own
	got, err := acmeGRPC.Queue("orders").Pop(ctx, queen.PopOptions{Batch: 10, Wait: 5 * time.Second})
	must(t, err)
	if len(got) != 1 || !strings.Contains(string(got[0].Data), `"acme"`) {
		t.Fatalf("acme popped %v", got)
	}
	def, err := defHTTP.Queue("orders").Pop(ctx, queen.PopOptions{Batch: 10, Wait: 5 * time.Second})
	must(t, err)
	if len(def) != 1 || !strings.Contains(string(def[0].Data), `"default"`) {
		t.Fatalf("the default tenant popped %v", def)
	}
	start := time.Now()
	none, err := betaGRPC.Queue("orders").Pop(ctx, queen.PopOptions{Batch: 10, Wait: 700 * time.Millisecond})
	must(t, err)
	if len(none) != 0 || time.Since(start) < 600*time.Millisecond {
		t.Fatalf("beta, which has no such queue, popped %v after %v", none, time.Since(start))
	}

	// The mission's transaction inside acme: its ack and its marker commit
	// together, and the marker is acme's alone.
	res, err := acmeGRPC.Transaction().Ack(got[0]).Once("charges", "o-1", time.Hour).Commit(ctx)
	must(t, err)
	if !res.Committed {
		t.Fatalf("acme's transaction: %+v", res)
	}
	for _, cl := range []struct {
		who   string
		c     *queen.Client
		found bool
	}{{"acme over HTTP", acmeHTTP, true}, {"the default tenant", defHTTP, false}, {"beta", betaGRPC, false}} {
		e, err := cl.c.KV().Get(ctx, "charges", "o-1")
		must(t, err)
		if e.Found != cl.found {
			t.Errorf("%s reads acme's marker: found=%v", cl.who, e.Found)
		}
	}
	// and the default tenant's message is still there to settle
	must(t, defHTTP.Ack(ctx, def[0]))

	// a header that is not a tenant name: 400 with the rule, nothing written
	r, err := a.send(10*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []any{map[string]any{"queue": "orders", "payload": map[string]any{}}}},
		map[string]string{tenant.Header: "Not A Name"})
	must(t, err)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tenant.Rule) {
		t.Fatalf("a bad tenant header: %s", r)
	}

	// ctl carries --tenant (QUEEN_TENANT too)
	acmeQueues := runCtl(t, nil, "", "--url", a.URL(), "--tenant", "acme", "-o", "json", "queues")
	betaQueues := runCtl(t, []string{"QUEEN_TENANT=beta"}, "", "--url", b.URL(), "-o", "json", "queues")
	if acmeQueues.code != 0 || !strings.Contains(acmeQueues.stdout, `"orders"`) {
		t.Fatalf("acme's queues: %s", acmeQueues)
	}
	if betaQueues.code != 0 || strings.Contains(betaQueues.stdout, `"orders"`) {
		t.Fatalf("beta's queues: %s", betaQueues)
	}
}

// Without --trust-tenant-header a header is ignored, logged once, and the
// request is the default tenant's (a client behind no proxy cannot pick
// another tenant's queues).
func TestTenantHeaderIgnoredWithoutTrust(t *testing.T) {
	n := startNode(t, nodeOpts{Extra: []string{"--default-subscription-mode", "all"}})
	for i := range 2 {
		r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/push",
			map[string]any{"items": []any{map[string]any{"queue": "q", "transactionId": "t" + string(rune('0'+i)), "payload": map[string]any{}}}},
			map[string]string{tenant.Header: "acme"})
		must(t, err)
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("push: %s", r)
		}
	}
	r, err := n.send(10*time.Second, http.MethodGet, "/api/v1/pop/queue/q?batch=10", nil, nil)
	must(t, err)
	var pop struct{ Messages []any }
	r.decode(t, &pop)
	if len(pop.Messages) != 2 {
		t.Fatalf("the default tenant pops %d of the pushes sent with an untrusted header: %s", len(pop.Messages), r)
	}
	log, err := os.ReadFile(n.LogPath())
	must(t, err)
	if got := strings.Count(string(log), "x-queen-tenant header was ignored"); got != 1 {
		t.Fatalf("the ignored header was logged %d times, want once:\n%s", got, log)
	}
}

// With JWT on the token's tenant claim names the tenant and no header
// overrides it; a claim that is not a tenant name is refused with 400 and
// the rule; "*" is for admin tokens, which list every tenant's queues
// (each row naming its tenant) and write to the tenant the header names.
func TestTenantClaims(t *testing.T) {
	n, _ := startJWTKafkaNode(t, "--trust-tenant-header")
	tok := func(claims map[string]any) map[string]string {
		return map[string]string{"Authorization": "Bearer " + kafkaToken(t, ctlJWTSecret, claims)}
	}
	acme := tok(map[string]any{"sub": "a", "role": "read-write", "tenant": "acme"})
	plain := tok(map[string]any{"sub": "d", "role": "read-write"})
	push := func(hdr map[string]string, q string) *response {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/push",
			map[string]any{"items": []any{map[string]any{"queue": q, "payload": map[string]any{"n": 1}}}}, hdr)
		must(t, err)
		return r
	}
	popped := func(hdr map[string]string, q string) int {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodGet, "/api/v1/pop/queue/"+q+"?batch=10", nil, hdr)
		must(t, err)
		if r.Status == http.StatusNoContent {
			return 0
		}
		var pop struct{ Messages []any }
		r.decode(t, &pop)
		return len(pop.Messages)
	}
	withHeader := func(h map[string]string, name string) map[string]string {
		out := map[string]string{tenant.Header: name}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	if r := push(withHeader(acme, "beta"), "jobs"); r.Status >= 300 {
		t.Fatalf("acme's push: %s", r)
	}
	if got := popped(plain, "jobs"); got != 0 {
		t.Fatalf("a token without a tenant claim popped %d of acme's", got)
	}
	if got := popped(tok(map[string]any{"sub": "b", "role": "read-write", "tenant": "beta"}), "jobs"); got != 0 {
		t.Fatalf("beta popped %d of acme's push sent with a beta header", got)
	}
	for _, bad := range []map[string]any{
		{"sub": "x", "role": "read-write", "tenant": "Not A Name"},
		{"sub": "x", "role": "read-write", "tenant": 7},
		{"sub": "x", "role": "read-write", "tenant": "*"},
	} {
		r := push(tok(bad), "jobs")
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "tenant") {
			t.Errorf("claim %v: %s", bad["tenant"], r)
		}
	}
	every := tok(map[string]any{"sub": "ops", "role": "admin", "tenant": "*"})
	if r := push(withHeader(every, "beta"), "jobs"); r.Status >= 300 {
		t.Fatalf("an admin of every tenant writing to beta: %s", r)
	}
	if got := popped(acme, "jobs"); got != 1 {
		t.Fatalf("acme popped %d, want its own one", got)
	}
	r, err := n.send(10*time.Second, http.MethodGet, "/api/v1/resources/queues", nil, every)
	must(t, err)
	var list struct {
		Queues []struct {
			Name   string `json:"name"`
			Tenant string `json:"tenant"`
		}
	}
	r.decode(t, &list)
	seen := map[string]bool{}
	for _, q := range list.Queues {
		seen[q.Tenant+"/"+q.Name] = true
	}
	if !seen["acme/jobs"] || !seen["beta/jobs"] || len(list.Queues) != 2 {
		b, _ := json.Marshal(list)
		t.Fatalf("an admin of every tenant lists %s", b)
	}
	// A tenant's own admin may not flip what spans every tenant of the log.
	acmeAdmin := tok(map[string]any{"sub": "a-ops", "role": "admin", "tenant": "acme"})
	r, err = n.send(10*time.Second, http.MethodPost, "/api/v1/system/maintenance", map[string]any{"enabled": true}, acmeAdmin)
	must(t, err)
	if r.Status != http.StatusForbidden {
		t.Fatalf("acme's admin turning push maintenance on: %s", r)
	}
	if r := push(plain, "after"); r.Status >= 300 || strings.Contains(string(r.Body), "buffered") {
		t.Fatalf("a push after acme's admin was refused maintenance: %s", r)
	}
	r, err = n.send(10*time.Second, http.MethodGet, "/api/v1/resources/queues", nil, acme)
	must(t, err)
	list.Queues = nil
	r.decode(t, &list)
	if len(list.Queues) != 1 || list.Queues[0].Tenant != "" {
		t.Fatalf("acme lists %+v", list.Queues)
	}
	// The other listings span the tenants for an admin of every tenant
	// too, each row naming its tenant; a tenant's token sees its own rows,
	// unnamed.
	rowsOf := func(hdr map[string]string, path string) map[string]bool {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodGet, path, nil, hdr)
		must(t, err)
		var rows []map[string]any
		if strings.HasPrefix(path, "/api/v1/status/queues") {
			var page struct {
				Queues []map[string]any `json:"queues"`
			}
			r.decode(t, &page)
			rows = page.Queues
		} else {
			r.decode(t, &rows)
		}
		out := map[string]bool{}
		for _, row := range rows {
			name, _ := row["name"].(string)
			if q, ok := row["queueName"].(string); ok {
				name = q
			}
			tn, _ := row["tenant"].(string)
			out[tn+"/"+name] = true
		}
		return out
	}
	if got := rowsOf(every, "/api/v1/status/queues"); !got["acme/jobs"] || !got["beta/jobs"] || !got["default/after"] || len(got) != 3 {
		t.Fatalf("an admin of every tenant: status/queues %v", got)
	}
	if got := rowsOf(every, "/api/v1/status/queues?limit=1&offset=1"); len(got) != 1 || !got["acme/jobs"] {
		t.Fatalf("an admin of every tenant: status/queues' second page %v", got)
	}
	if got := rowsOf(acme, "/api/v1/status/queues"); len(got) != 1 || !got["/jobs"] {
		t.Fatalf("acme: status/queues %v", got)
	}
	if got := rowsOf(every, "/api/v1/consumer-groups"); !got["acme/jobs"] {
		t.Fatalf("an admin of every tenant: consumer-groups %v", got)
	}
	if got := rowsOf(acme, "/api/v1/consumer-groups"); !got["/jobs"] || len(got) != 1 {
		t.Fatalf("acme: consumer-groups %v", got)
	}
	// acme's one message is leased, not acked: pending
	if got := rowsOf(every, "/api/v1/consumer-groups/lagging?minLagSeconds=0"); !got["acme/jobs"] || len(got) != 1 {
		t.Fatalf("an admin of every tenant: lagging %v", got)
	}
	if got := rowsOf(acme, "/api/v1/consumer-groups/lagging?minLagSeconds=0"); !got["/jobs"] || len(got) != 1 {
		t.Fatalf("acme: lagging %v", got)
	}
}
