package dashboard_test

// The dashboard in a real browser: headless Chromium (Debian's chromium,
// which .ci/run installs) driven by chromedp, against a real three-node
// cluster (nodeproc) with JWT on. The test seeds an incident — a consumer
// group behind, dead letters with two kinds of error, one follower killed
// with SIGKILL — and checks that the landing page shows all three whichever
// live node serves it, that the page's numbers equal the API's, that seek
// and replay clicked on the page change the broker's state, and what a
// read-only token sees. It saves a screenshot of every page (the folder is
// printed; DASHBOARD_SCREENSHOTS chooses another) and, with
// DASHBOARD_UPDATE_DOCS=1, the README's docs/dashboard.png.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/nodeproc"
)

const jwtSecret = "dashboard-browser-test-secret-32b!"

// chromium finds the browser: $CHROMIUM, else the usual names on PATH.
// needChromium is the browser's path, or skips t saying how to get one.
func needChromium(t *testing.T) string {
	t.Helper()
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium found (set CHROMIUM, or apt-get install -y chromium; .ci/run installs it): the dashboard's browser test cannot run")
	}
	return exe
}

func chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium with a tab, and what the test needs
// around it.
type browser struct {
	t    *testing.T
	ctx  context.Context
	shot string // the screenshot folder
}

func startBrowser(t *testing.T, ctx context.Context, exe string) *browser {
	t.Helper()
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(dir),
		chromedp.DisableGPU,
		chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() }) // stops the browser this test started
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	folder := os.Getenv("DASHBOARD_SCREENSHOTS")
	if folder == "" {
		folder = filepath.Join("testdata", "screenshots")
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(folder)
	return &browser{t: t, ctx: bctx, shot: abs}
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	for _, a := range actions {
		if err := chromedp.Do(b.ctx, a); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`String(`+expr+`)`))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// text is the text of the first element matching a CSS selector ("" when
// there is none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(b.eval(fmt.Sprintf(`(document.querySelector(%q)||{textContent:''}).textContent`, sel)))
}

// waitFor polls a JavaScript condition until it holds.
func (b *browser) waitFor(what, cond string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b.eval(`!!(`+cond+`)`) == "true" {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: not within %v; page %s, banner %q, main: %.600s", what, within, b.eval(`location.href`),
				b.text("#banner"), b.text("#main"))
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func (b *browser) waitSel(sel string) {
	b.t.Helper()
	b.waitFor("element "+sel, fmt.Sprintf(`document.querySelector(%q)`, sel), 20*time.Second)
}

// open loads a page of the dashboard as served by base and waits until it
// has read the API once.
func (b *browser) open(base, hash string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base + "/dashboard/?lagSeconds=1" + hash))
	b.waitFor("first refresh of "+hash, `document.querySelector('#refresh').textContent.startsWith('updated') || !document.querySelector('#banner').hidden`, 20*time.Second)
}

// go changes the page within the loaded dashboard and waits for its data.
func (b *browser) goTo(hash string) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`(document.querySelector('#refresh').textContent='', location.hash=%q)`, hash))
	b.waitFor("refresh of "+hash, `document.querySelector('#refresh').textContent.startsWith('updated') || !document.querySelector('#banner').hidden`, 20*time.Second)
}

func (b *browser) useToken(tok string) {
	b.t.Helper()
	b.do(chromedp.SetValue(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)))
}

// click clicks an element twice: the page's write buttons arm on the first
// click and act on the second.
func (b *browser) clickTwice(sel string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(sel)))
	b.waitFor("armed "+sel, fmt.Sprintf(`document.querySelector(%q).classList.contains('armed')`, sel), 5*time.Second)
	b.do(chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(b.shot, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// call is the test's own API call through node n (JWT: admin), decoded.
func call(t *testing.T, ctx context.Context, n *nodeproc.Node, method, path string, body any, out any) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	code, b, err := n.Do(ctx, method, path, raw)
	if err != nil || code/100 != 2 {
		t.Fatalf("%s %s via %s: %d %v %s", method, path, n.ID(), code, err, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type popped struct {
	LeaseID  string `json:"leaseId"`
	Messages []struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
	} `json:"messages"`
}

func TestDashboardInABrowser(t *testing.T) {
	exe := needChromium(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kinds, err := authtest.Kinds(jwtSecret)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, k := range kinds {
		tokens[k.Name] = k.Token
	}
	bin, err := nodeproc.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodeproc.StartCluster(ctx, nodeproc.ClusterConfig{Bin: bin, Dir: t.TempDir(), Nodes: 3,
		Flags: []string{"--jwt-enabled", "--jwt-algorithm", "HS256", "--jwt-secret", jwtSecret,
			"--jwt-issuer", authtest.Issuer, "--jwt-audience", authtest.Audience},
		Node: func(i int, s *nodeproc.Spec) error { s.Token = tokens["admin"]; return nil },
		Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	leader, err := c.WaitLeader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up after %v; leader %s", time.Since(began).Round(time.Millisecond), leader.ID())

	// The incident. Dead letters with two kinds of error: payments has no
	// retries, so each failed ack dead-letters its message.
	call(t, ctx, leader, "POST", "/api/v1/configure", map[string]any{"queue": "payments", "options": map[string]any{"retryLimit": 0, "retryDelay": 0}}, nil)
	errs := []string{"card 4242 declined", "card 4000 declined", "card 5555 declined", "timeout after 30s calling bank", "timeout after 45s calling bank"}
	var items []map[string]any
	for i := range errs {
		items = append(items, map[string]any{"queue": "payments", "transactionId": fmt.Sprintf("pay-%d", i+1), "payload": map[string]any{"amount": (i + 1) * 100}})
	}
	call(t, ctx, leader, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
	for _, text := range errs {
		var p popped
		call(t, ctx, leader, "GET", "/api/v1/pop/queue/payments?batch=1", nil, &p)
		if len(p.Messages) != 1 {
			t.Fatalf("payments pop: %+v", p)
		}
		m := p.Messages[0]
		call(t, ctx, leader, "POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"leaseId": m.LeaseID, "status": "failed", "error": text}, nil)
	}
	// A group behind: billing consumed 5 of orders' 20 messages.
	items = nil
	for i := range 20 {
		items = append(items, map[string]any{"queue": "orders", "transactionId": fmt.Sprintf("o%d", i+1), "payload": map[string]any{"orderId": i + 1}})
	}
	call(t, ctx, leader, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
	var p popped
	call(t, ctx, leader, "GET", "/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all&batch=5", nil, &p)
	if len(p.Messages) != 5 {
		t.Fatalf("billing pop: %+v", p)
	}
	var acks []any
	for _, m := range p.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
	}
	call(t, ctx, leader, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": "billing", "acknowledgments": acks}, nil)
	ordersPID := p.Messages[0].PartitionID
	// What the other pages show: a trace, a KV row, a timer.
	call(t, ctx, leader, "POST", "/api/v1/traces", map[string]any{"transactionId": "o1", "partitionId": ordersPID,
		"traceNames": []string{"checkout"}, "eventType": "info", "data": map[string]any{"step": "charged", "chargeId": "ch_1"}}, nil)
	call(t, ctx, leader, "POST", "/api/v1/kv", map[string]any{"operations": []any{
		map[string]any{"op": "put", "ns": "charges", "key": "charge:o1", "value": map[string]any{"chargeId": "ch_1"}, "ttlSeconds": 3600}}}, nil)
	call(t, ctx, leader, "POST", "/api/v1/timers", map[string]any{"operations": []any{
		map[string]any{"op": "schedule", "queue": "reminders", "timerKey": "invoice-o1", "delayMs": 3600000, "txn": "rem-o1",
			"payload": base64.StdEncoding.EncodeToString([]byte(`{"remind":"o1"}`))}}}, nil)
	time.Sleep(1100 * time.Millisecond) // the oldest pending order waits a second: lagging at ?lagSeconds=1

	// One follower down.
	var down *nodeproc.Node
	var live []*nodeproc.Node
	for _, n := range c.Nodes() {
		if n.ID() != leader.ID() && down == nil {
			down = n
		} else {
			live = append(live, n)
		}
	}
	if err := down.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed follower %s (SIGKILL); live: %s, %s", down.ID(), live[0].ID(), live[1].ID())

	b := startBrowser(t, ctx, exe)
	t.Logf("screenshots go to %s", b.shot)

	// The landing page, from each live node: the three parts of the incident
	// and the same numbers as the API.
	var dlqTotal struct {
		Total int `json:"total"`
	}
	call(t, ctx, leader, "GET", "/api/v1/dlq?limit=1", nil, &dlqTotal)
	if dlqTotal.Total != 5 {
		t.Fatalf("dead letters: %d, want 5", dlqTotal.Total)
	}
	for i, n := range live {
		b.open(n.URL(), "#/cluster")
		b.waitFor("the page asks for a token", `document.querySelector('#banner').textContent.includes('401')`, 10*time.Second)
		b.useToken(tokens["admin"])
		b.waitSel(`[data-testid="incident-node-down-` + down.ID() + `"]`)
		b.waitSel(`[data-testid="incident-lagging-billing-orders"]`)
		b.waitSel(`[data-testid="incident-dlq"]`)
		var st struct {
			Queues   []any `json:"queues"`
			Messages struct {
				Pending int `json:"pending"`
			} `json:"messages"`
			Cluster struct {
				Leader struct {
					ID string `json:"id"`
				} `json:"leader"`
			} `json:"cluster"`
			DeadLetterQueue struct {
				TotalMessages int `json:"totalMessages"`
				TopErrors     []struct {
					Signature string `json:"signature"`
					Count     int    `json:"count"`
				} `json:"topErrors"`
			} `json:"deadLetterQueue"`
		}
		call(t, ctx, n, "GET", "/api/v1/status", nil, &st)
		want := map[string]string{
			"nodes-up":       "2/3",
			"dlq-total":      strconv.Itoa(dlqTotal.Total),
			"dlq-signatures": strconv.Itoa(len(st.DeadLetterQueue.TopErrors)),
			"pending-total":  strconv.Itoa(st.Messages.Pending),
			"leader":         st.Cluster.Leader.ID,
			"lagging-count":  "1",
			"served-by":      "served by " + n.ID(),
			"queue-count":    strconv.Itoa(len(st.Queues)),
			"role":           "admin · ad",
		}
		for id, w := range want {
			got := b.text(`[data-testid="` + id + `"]`)
			if id == "served-by" {
				got = strings.SplitN(got, " (", 2)[0]
			}
			if got != w {
				t.Errorf("served by %s: %s shows %q, the API says %q", n.ID(), id, got, w)
			}
		}
		if len(st.DeadLetterQueue.TopErrors) != 2 || st.DeadLetterQueue.TopErrors[0].Count != 3 {
			t.Errorf("error signatures: %+v", st.DeadLetterQueue.TopErrors)
		}
		if got := b.text(`[data-testid="node-` + leader.ID() + `"] [data-col="role"]`); got != "leader" {
			t.Errorf("served by %s: the leader's row says %q", n.ID(), got)
		}
		if cls := b.eval(`document.querySelector('[data-testid="node-` + down.ID() + `"]').className`); !strings.Contains(cls, "down") {
			t.Errorf("served by %s: the killed node's row is not marked down (%q)", n.ID(), cls)
		}
		name := "cluster"
		if i > 0 {
			name = "cluster-" + n.ID()
		}
		path := b.screenshot(name)
		if i == 0 && os.Getenv("DASHBOARD_UPDATE_DOCS") == "1" {
			png, _ := os.ReadFile(path)
			if err := os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The other pages, served by the follower that still runs (its writes
	// go to the leader through it).
	f := live[0]
	if f.ID() == leader.ID() {
		f = live[1]
	}
	b.open(f.URL(), "#/queues")
	b.useToken(tokens["admin"])
	b.waitSel(`[data-testid="queue-orders"]`)
	var qs struct {
		Queues []struct {
			Name     string `json:"name"`
			Messages struct {
				Pending    int `json:"pending"`
				DeadLetter int `json:"deadLetter"`
			} `json:"messages"`
		} `json:"queues"`
	}
	call(t, ctx, f, "GET", "/api/v1/status/queues", nil, &qs)
	for _, q := range qs.Queues {
		if got := b.text(`[data-testid="queue-` + q.Name + `"] [data-col="pending"]`); got != strconv.Itoa(q.Messages.Pending) {
			t.Errorf("queues page: %s pending %q, API %d", q.Name, got, q.Messages.Pending)
		}
		if got := b.text(`[data-testid="queue-` + q.Name + `"] [data-col="deadLetter"]`); got != strconv.Itoa(q.Messages.DeadLetter) {
			t.Errorf("queues page: %s dead letters %q, API %d", q.Name, got, q.Messages.DeadLetter)
		}
	}
	b.screenshot("queues")
	b.goTo("#/queue/orders")
	b.waitSel(`svg.chart polyline`)
	if got := b.text(`[data-testid="q-total"]`); got != "20" {
		t.Errorf("queue page: total %q, want 20", got)
	}
	b.screenshot("queue")

	// Seek: billing skips to the end of orders.
	b.goTo("#/groups")
	seek := `[data-testid="seek-end_billing_orders"]`
	b.waitSel(seek)
	if got := b.text(`[data-testid="group-billing-orders"] [data-col="pending"]`); got != "15" {
		t.Errorf("groups page: billing pending %q, want 15", got)
	}
	b.screenshot("groups")
	b.clickTwice(seek)
	b.waitFor("the seek's answer", `document.querySelector('#banner').textContent.includes('partitions moved')`, 15*time.Second)
	var groups []struct {
		Name    string `json:"name"`
		Queue   string `json:"queueName"`
		Pending int    `json:"pendingMessages"`
	}
	call(t, ctx, leader, "GET", "/api/v1/consumer-groups", nil, &groups)
	for _, g := range groups {
		if g.Name == "billing" && g.Queue == "orders" && g.Pending != 0 {
			t.Errorf("after the seek clicked on the page, billing has %d pending on orders (API)", g.Pending)
		}
	}
	b.waitFor("the page shows the seek", `document.querySelector('[data-testid="group-billing-orders"] [data-col="pending"]').textContent === '0'`, 15*time.Second)

	// Dead letters: the signatures, then replay one.
	b.goTo("#/dlq")
	b.waitFor("two signatures", `document.querySelectorAll('[data-testid="sig-row"]').length === 2`, 15*time.Second)
	if got := b.text(`[data-testid="sig-row"] [data-col="count"]`); got != "3" {
		t.Errorf("dlq page: the first signature counts %q, want 3", got)
	}
	b.screenshot("dlq")
	replayID := strings.TrimPrefix(b.eval(`document.querySelector('button[data-testid^="replay_"]').dataset.testid`), "replay_")
	b.clickTwice(`[data-testid="replay_` + replayID + `"]`)
	b.waitFor("the replay's answer", `document.querySelector('#banner').textContent.includes('moved')`, 15*time.Second)
	call(t, ctx, leader, "GET", "/api/v1/dlq?limit=1", nil, &dlqTotal)
	if dlqTotal.Total != 4 {
		t.Errorf("after the replay clicked on the page, %d dead letters (API), want 4", dlqTotal.Total)
	}
	var replayed struct {
		Status string `json:"status"`
		Queue  string `json:"queue"`
	}
	var anyPay popped
	call(t, ctx, leader, "GET", "/api/v1/messages?queue=payments&limit=1", nil, &anyPay)
	if len(anyPay.Messages) == 0 {
		t.Fatal("no payments message")
	}
	call(t, ctx, leader, "GET", "/api/v1/messages/"+anyPay.Messages[0].PartitionID+"/dlq:"+replayID, nil, &replayed)
	if replayed.Queue != "payments" || replayed.Status != "pending" {
		t.Errorf("the replayed message: %+v", replayed)
	}
	b.waitFor("the page shows 4 records", `document.querySelector('#d-count').textContent.includes('of 4')`, 15*time.Second)

	// A message and its traces.
	b.goTo("#/messages?pid=" + ordersPID + "&txn=o1")
	b.waitFor("the trace", `document.querySelector('[data-testid="m-traces"]') && document.querySelector('[data-testid="m-traces"]').textContent === '1'`, 15*time.Second)
	b.screenshot("messages")

	// KV and timers.
	b.goTo("#/kv")
	b.do(chromedp.SetValue(chromedp.CSS("#k-ns"), "charges"), chromedp.SetValue(chromedp.CSS("#k-prefix"), "charge:"),
		chromedp.Click(chromedp.CSS(`#k-form button[type=submit]`)))
	b.waitFor("the KV row", `document.querySelector('#k-out').textContent.includes('charge:o1')`, 15*time.Second)
	b.screenshot("kv")
	b.goTo("#/timers")
	b.do(chromedp.SetValue(chromedp.CSS("#t-queue"), "reminders"), chromedp.Click(chromedp.CSS(`#t-form button[type=submit]`)))
	b.waitFor("the timer", `document.querySelector('[data-testid="timer-count"]') && document.querySelector('[data-testid="timer-count"]').textContent === '1'`, 15*time.Second)
	b.screenshot("timers")
	b.goTo("#/maintenance")
	b.waitSel(`[data-testid="switch-push"]`)
	b.screenshot("maintenance")

	// A read-only token: no write buttons, and a 403 said plainly.
	b.do(chromedp.Click(chromedp.CSS("#token-clear")))
	b.useToken(tokens["read-only"])
	b.goTo("#/groups")
	b.waitSel(`[data-testid="group-billing-orders"]`)
	if n := b.eval(`document.querySelectorAll('#main button[data-act]').length`); n != "0" {
		t.Errorf("a read-only token sees %s write buttons on the groups page", n)
	}
	b.goTo("#/dlq")
	b.waitSel(`[data-testid="sig-row"]`)
	if n := b.eval(`document.querySelectorAll('#main button[data-act]').length`); n != "0" {
		t.Errorf("a read-only token sees %s write buttons on the dead-letter page", n)
	}
	b.goTo("#/maintenance")
	b.waitFor("the 403", `document.querySelector('#banner').textContent.startsWith('403')`, 10*time.Second)
	b.screenshot("maintenance-read-only")

	// A phone.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	b.useToken(tokens["admin"])
	b.goTo("#/cluster")
	b.waitSel(`[data-testid="incident-dlq"]`)
	if w := b.eval(`document.documentElement.scrollWidth`); w != "390" {
		t.Errorf("on a phone the page is %s px wide, want 390 (no sideways scrolling)", w)
	}
	b.screenshot("cluster-phone")
	t.Logf("browser test took %v (screenshots in %s)", time.Since(began).Round(time.Millisecond), b.shot)
}
