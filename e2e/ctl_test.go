package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

// `queen-node ctl` (package ctl), run as the built binary against real
// nodes: its tables and JSON against the API's own answers, dead-letter
// replay and purge with their progress lines, drain, the cluster view on
// three nodes, the exit codes, and JWT over HTTPS.

// ctlRun is one run of `queen-node ctl`.
type ctlRun struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r ctlRun) String() string {
	return fmt.Sprintf("queen-node ctl %s: exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// runCtl runs `queen-node ctl args...` with the caller's environment
// without QUEEN_* plus env, stdin as its input, for at most 90 s.
func runCtl(t testing.TB, env []string, stdin string, args ...string) ctlRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, append([]string{"ctl"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := ctlRun{args: args, stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		t.Fatalf("did not finish within 90s: %s", r)
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("queen-node ctl %v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// ctl runs ctl against the node.
func (n *node) ctl(t testing.TB, args ...string) ctlRun {
	t.Helper()
	return runCtl(t, nil, "", append([]string{"--url", n.URL()}, args...)...)
}

// mustCtl runs ctl against the node and requires exit 0.
func (n *node) mustCtl(t testing.TB, args ...string) ctlRun {
	t.Helper()
	r := n.ctl(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0: %s", r)
	}
	return r
}

// wantFail requires the exit code and the text on stderr.
func wantFail(t testing.TB, r ctlRun, code int, text string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, text) {
		t.Fatalf("want exit %d and %q on stderr: %s", code, text, r)
	}
}

// asJSON decodes JSON text into a generic value.
func asJSON(t testing.TB, what string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, b)
	}
	return v
}

// sameJSON requires ctl's JSON to be the API's, after dropping the named
// members (values that move with the clock) wherever they are.
func sameJSON(t testing.TB, what string, ctl string, api []byte, drop ...string) {
	t.Helper()
	a, b := asJSON(t, what+" (ctl)", []byte(ctl)), asJSON(t, what+" (API)", api)
	a, b = without(a, drop), without(b, drop)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: ctl printed\n%s\nthe API answered\n%s", what, ctl, api)
	}
}

func without(v any, drop []string) any {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range drop {
			delete(x, k)
		}
		for k, e := range x {
			x[k] = without(e, drop)
		}
	case []any:
		for i, e := range x {
			x[i] = without(e, drop)
		}
	}
	return v
}

var columns = regexp.MustCompile(`\s{2,}`)

// tableRow finds the row of a table whose first cells are first..., split
// on runs of two or more spaces; nil when there is none.
func tableRow(out string, first ...string) []string {
	for _, line := range strings.Split(out, "\n") {
		cells := columns.Split(strings.TrimSpace(line), -1)
		if len(cells) >= len(first) && reflect.DeepEqual(cells[:len(first)], first) {
			return cells
		}
	}
	return nil
}

// column is the named column's cell of a row, by the table's header (the
// first line with a cell of that name).
func column(t testing.TB, out string, row []string, name string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		header := columns.Split(strings.TrimSpace(line), -1)
		for i, h := range header {
			if h == name && i < len(row) {
				return row[i]
			}
		}
	}
	t.Fatalf("no column %s (row %q) in\n%s", name, row, out)
	return ""
}

// deadLetterAll pops every message of the queue in queue mode and fails it
// (the queue has retryLimit 0): each becomes a dead letter with the error
// "boom-<transactionId>".
func deadLetterAll(t testing.TB, a *api, queue string) {
	t.Helper()
	for range 100 {
		p := a.pop("/api/v1/pop/queue/"+queue, url.Values{"batch": {"1000"}, "partitions": {"16"}})
		if p == nil {
			return
		}
		acks := make([]ackReq, len(p.Messages))
		for i, m := range p.Messages {
			acks[i] = ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "failed",
				Error: strp("boom-" + m.TransactionID)}
		}
		for i, r := range a.ackBatch(nil, acks) {
			if !r.Success || !r.DLQ {
				t.Fatalf("the failed ack of %s did not dead-letter it: %+v", acks[i].TransactionID, r)
			}
		}
	}
	t.Fatalf("queue %s does not empty", queue)
}

// dlqTotal is GET /api/v1/dlq?queue=...'s total.
func dlqTotal(t testing.TB, a *api, queue string) int {
	t.Helper()
	var d struct{ Total int }
	a.mustStatus(200, "GET", "/api/v1/dlq?limit=1&queue="+url.QueryEscape(queue), nil).decode(t, &d)
	return d.Total
}

func pushN(t testing.TB, a *api, queue string, n, partitions int, prefix string) {
	t.Helper()
	items := make([]pushItem, n)
	for i := range items {
		items[i] = pushItem{Queue: queue, Partition: fmt.Sprintf("p%d", i%partitions), TransactionID: fmt.Sprintf("%s%d", prefix, i),
			Payload: map[string]any{"i": i}}
	}
	for _, r := range a.push(items...) {
		if r.Status != "queued" {
			t.Fatalf("push: %+v", r)
		}
	}
}

// The read commands print what the API answers: queues (with each
// queue's dead letters), queue, depth, groups, group, dlq, messages,
// message, kv get and list, health and maintenance, as tables and as JSON;
// an unknown queue is the API's 404 and exit 1, bad flags exit 2.
func TestCtlReadsMatchTheAPI(t *testing.T) {
	n := startNode(t, nodeOpts{})
	a := n.api(t)
	a.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "orders", "options": map[string]any{"retryLimit": 0}})
	pushN(t, a, "orders", 8, 2, "o")
	p := a.pop("/api/v1/pop/queue/orders", url.Values{"batch": {"2"}, "consumerGroup": {"billing"}, "subscriptionMode": {"all"}})
	a.ackAll(p, strp("billing"))
	p = a.pop("/api/v1/pop/queue/orders/partition/p0", url.Values{"batch": {"3"}})
	acks := make([]ackReq, len(p.Messages))
	for i, m := range p.Messages {
		acks[i] = ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "failed", Error: strp("boom-" + m.TransactionID)}
	}
	a.ackBatch(nil, acks)
	if got := dlqTotal(t, a, "orders"); got != 3 {
		t.Fatalf("seeded %d dead letters, want 3", got)
	}
	a.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "empty"})

	t.Run("queues", func(t *testing.T) {
		var list struct{ Queues []map[string]any }
		a.mustStatus(200, "GET", "/api/v1/resources/queues", nil).decode(t, &list)
		r := n.mustCtl(t, "queues", "-o", "json")
		var got struct{ Queues []map[string]any }
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Queues) != len(list.Queues) {
			t.Fatalf("%v: %s", err, r)
		}
		for i, row := range got.Queues {
			var totals struct{ Totals struct{ DeadLetter float64 } }
			_ = json.Unmarshal(a.queueDetail(row["name"].(string)), &totals)
			if row["deadLetter"] != totals.Totals.DeadLetter {
				t.Fatalf("%s: deadLetter %v, the detail says %v", row["name"], row["deadLetter"], totals.Totals.DeadLetter)
			}
			delete(row, "deadLetter")
			if !reflect.DeepEqual(row, list.Queues[i]) {
				t.Fatalf("row %d: ctl %v, API %v", i, row, list.Queues[i])
			}
		}
		tab := n.mustCtl(t, "queues").stdout
		totals := a.queueTotals("orders")
		row := tableRow(tab, "orders")
		if row == nil {
			t.Fatalf("no row for orders:\n%s", tab)
		}
		for col, want := range map[string]int{"PENDING": totals["pending"], "PROCESSING": totals["processing"],
			"DLQ": totals["deadLetter"], "TOTAL": totals["total"], "PARTITIONS": 3} {
			if got := column(t, tab, row, col); got != fmt.Sprint(want) {
				t.Errorf("orders %s: %s, want %d\n%s", col, got, want, tab)
			}
		}
		if tableRow(tab, "empty", "1", "0", "0", "0", "0") == nil {
			t.Errorf("no row for the empty queue:\n%s", tab)
		}
	})

	t.Run("queue and depth", func(t *testing.T) {
		sameJSON(t, "queue orders", n.mustCtl(t, "queue", "orders", "-o", "json").stdout, a.queueDetail("orders"))
		tab := n.mustCtl(t, "queue", "orders").stdout
		if !strings.Contains(tab, "3 dead letters") || tableRow(tab, "p0") == nil || tableRow(tab, "p1") == nil {
			t.Fatalf("queue table:\n%s", tab)
		}
		api := a.mustStatus(200, "GET", "/api/v1/resources/queues/orders/depth?group=billing", nil).Body
		sameJSON(t, "depth", n.mustCtl(t, "depth", "orders", "--group", "billing", "-o", "json").stdout, api)
		var d struct{ Pending int }
		json.Unmarshal(api, &d)
		if tab := n.mustCtl(t, "depth", "--group", "billing", "orders").stdout; !regexp.MustCompile(fmt.Sprintf(`pending:\s+%d in`, d.Pending)).MatchString(tab) {
			t.Fatalf("depth table (pending %d):\n%s", d.Pending, tab)
		}
	})

	t.Run("groups", func(t *testing.T) {
		api := a.mustStatus(200, "GET", "/api/v1/consumer-groups", nil).Body
		sameJSON(t, "groups", n.mustCtl(t, "groups", "-o", "json").stdout, api, "maxTimeLag")
		var rows []struct {
			Name, QueueName, State string
			PendingMessages        int
		}
		json.Unmarshal(api, &rows)
		tab := n.mustCtl(t, "groups").stdout
		for _, g := range rows {
			row := tableRow(tab, g.Name, g.QueueName)
			if row == nil || column(t, tab, row, "PENDING") != fmt.Sprint(g.PendingMessages) || column(t, tab, row, "STATE") != g.State {
				t.Fatalf("group %s on %s (pending %d, %s):\n%s", g.Name, g.QueueName, g.PendingMessages, g.State, tab)
			}
		}
		api = a.mustStatus(200, "GET", "/api/v1/consumer-groups/billing", nil).Body
		sameJSON(t, "group billing", n.mustCtl(t, "group", "billing", "-o", "json").stdout, api, "lagSeconds")
		tab = n.mustCtl(t, "group", "billing").stdout
		var g struct {
			Queues []struct {
				Partitions []struct {
					Partition                    string
					ConsumedOffset, NewestOffset int
					PendingMessages              int
				}
			}
		}
		json.Unmarshal(api, &g)
		for _, p := range g.Queues[0].Partitions {
			if tableRow(tab, "orders", p.Partition, fmt.Sprint(p.ConsumedOffset), fmt.Sprint(p.NewestOffset), fmt.Sprint(p.PendingMessages)) == nil {
				t.Fatalf("group table (%+v):\n%s", p, tab)
			}
		}
		wantFail(t, n.ctl(t, "group", "nobody"), 1, "HTTP 404: Consumer group not found: nobody")
	})

	t.Run("dlq", func(t *testing.T) {
		api := a.mustStatus(200, "GET", "/api/v1/dlq?queue=orders&limit=100&offset=0", nil).Body
		sameJSON(t, "dlq", n.mustCtl(t, "dlq", "--queue", "orders", "-o", "json").stdout, api)
		var page struct {
			Messages []struct {
				DlqID, TransactionID, ErrorMessage string
				RetryCount                         int
			}
		}
		json.Unmarshal(api, &page)
		r := n.mustCtl(t, "dlq", "--queue", "orders")
		for _, d := range page.Messages {
			row := tableRow(r.stdout, d.DlqID, "orders", "p0", "__QUEUE_MODE__", d.TransactionID)
			if row == nil || column(t, r.stdout, row, "ERROR") != d.ErrorMessage ||
				column(t, r.stdout, row, "RETRIES") != fmt.Sprint(d.RetryCount) || !strings.HasSuffix(column(t, r.stdout, row, "FAILED"), " ago") {
				t.Fatalf("dead letter %+v:\n%s", d, r.stdout)
			}
		}
		if !strings.Contains(r.stderr, "dead letters 1-3 of 3") {
			t.Fatalf("dlq footer: %s", r)
		}
	})

	t.Run("messages", func(t *testing.T) {
		api := a.mustStatus(200, "GET", "/api/v1/messages?queue=orders&status=dead_letter&limit=200&offset=0", nil).Body
		sameJSON(t, "messages", n.mustCtl(t, "messages", "--queue", "orders", "--status", "dead_letter", "-o", "json").stdout, api)
		var page struct {
			Messages []struct{ TransactionID, PartitionID string }
		}
		json.Unmarshal(api, &page)
		if len(page.Messages) != 3 {
			t.Fatalf("dead-letter messages: %s", api)
		}
		m := page.Messages[0]
		tab := n.mustCtl(t, "messages", "--queue", "orders").stdout
		if tableRow(tab, "orders", "p0", m.TransactionID, "dead_letter") == nil {
			t.Fatalf("messages table:\n%s", tab)
		}
		api = a.mustStatus(200, "GET", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID, nil).Body
		sameJSON(t, "message", n.mustCtl(t, "message", m.PartitionID, m.TransactionID, "-o", "json").stdout, api)
		tab = n.mustCtl(t, "message", m.PartitionID, m.TransactionID).stdout
		if !strings.Contains(tab, "dead_letter") || !strings.Contains(tab, "boom-"+m.TransactionID) || !strings.Contains(tab, `"i": `) {
			t.Fatalf("message view:\n%s", tab)
		}
		wantFail(t, n.ctl(t, "message", m.PartitionID, "nope"), 1, "HTTP 404: Message not found")
	})

	t.Run("kv", func(t *testing.T) {
		a.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{
			map[string]any{"op": "put", "ns": "cfg", "key": "flags/dark", "value": map[string]any{"on": true}, "forever": true},
			map[string]any{"op": "put", "ns": "cfg", "key": "flags/beta", "value": 7, "ttlSeconds": 600},
			map[string]any{"op": "put", "ns": "cfg", "key": "other", "value": "x", "forever": true}}})
		api := a.mustStatus(200, "GET", "/api/v1/kv/cfg/flags/dark", nil).Body
		sameJSON(t, "kv get", n.mustCtl(t, "kv", "get", "cfg", "flags/dark", "-o", "json").stdout, api)
		if tab := n.mustCtl(t, "kv", "get", "cfg", "flags/dark").stdout; !strings.Contains(tab, `"on": true`) || !regexp.MustCompile(`expires:\s+never`).MatchString(tab) {
			t.Fatalf("kv get:\n%s", tab)
		}
		wantFail(t, n.ctl(t, "kv", "get", "cfg", "flags/none"), 1, "no entry flags/none")
		// A key the path route cannot carry (an empty segment) is read with a get op.
		a.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{
			map[string]any{"op": "put", "ns": "cfg", "key": "odd//key", "value": 1, "forever": true}}})
		if r := n.mustCtl(t, "kv", "get", "cfg", "odd//key", "-o", "json"); !strings.Contains(r.stdout, `"key": "odd//key"`) {
			t.Fatalf("kv get odd//key: %s", r)
		}
		op := map[string]any{"op": "getPrefix", "ns": "cfg", "prefix": "flags/", "limit": 100}
		api = a.mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{op}}).Body
		sameJSON(t, "kv list", n.mustCtl(t, "kv", "list", "cfg", "--prefix", "flags/", "-o", "json").stdout, api)
		tab := n.mustCtl(t, "kv", "list", "cfg", "--prefix", "flags/").stdout
		if tableRow(tab, "flags/beta") == nil || tableRow(tab, "flags/dark") == nil || tableRow(tab, "other") != nil {
			t.Fatalf("kv list:\n%s", tab)
		}
	})

	t.Run("health and maintenance", func(t *testing.T) {
		r := n.mustCtl(t, "health", "-o", "json")
		var h struct {
			Status string
			NodeID string
		}
		json.Unmarshal([]byte(r.stdout), &h)
		if h.Status != "healthy" || h.NodeID != n.ID() {
			t.Fatalf("health: %s", r)
		}
		if tab := n.mustCtl(t, "health").stdout; !strings.Contains(tab, "status:") || !strings.Contains(tab, "healthy") {
			t.Fatalf("health table:\n%s", tab)
		}
		n.mustCtl(t, "maintenance", "on", "--pop")
		var m struct{ PopMaintenanceMode bool }
		a.mustStatus(200, "GET", "/api/v1/system/maintenance", nil).decode(t, &m)
		if !m.PopMaintenanceMode {
			t.Fatal("pop maintenance is not on")
		}
		if tab := n.mustCtl(t, "maintenance").stdout; !regexp.MustCompile(`pop maintenance:\s+on`).MatchString(tab) {
			t.Fatalf("maintenance table:\n%s", tab)
		}
		sameJSON(t, "maintenance", n.mustCtl(t, "maintenance", "-o", "json").stdout,
			a.mustStatus(200, "GET", "/api/v1/system/maintenance", nil).Body)
		n.mustCtl(t, "maintenance", "--pop", "off")
		a.mustStatus(200, "GET", "/api/v1/system/maintenance", nil).decode(t, &m)
		if m.PopMaintenanceMode {
			t.Fatal("pop maintenance is still on")
		}
	})

	t.Run("errors", func(t *testing.T) {
		wantFail(t, n.ctl(t, "queue", "nope"), 1, "HTTP 404: Queue not found")
		wantFail(t, n.ctl(t, "queue", "nope", "-o", "json"), 1, "HTTP 404: Queue not found")
		wantFail(t, n.ctl(t, "group", "seek", "billing", "nope", "--to-end"), 1, "HTTP 404: Queue not found: nope")
		wantFail(t, n.ctl(t, "queues", "--bogus"), 2, "usage: queen-node ctl queues")
		wantFail(t, n.ctl(t, "-o", "yaml", "queues"), 2, "-o must be table or json")
		wantFail(t, n.ctl(t, "queue"), 2, "usage: queen-node ctl queue <queue>")
		wantFail(t, n.ctl(t, "frobnicate"), 2, `unknown command "frobnicate"`)
		closed, err := nodeproc.FreeAddrs(1, nil)
		must(t, err)
		wantFail(t, runCtl(t, nil, "", "--url", "http://"+closed[0].HTTP, "--timeout", "3s", "queues"), 1, "connection refused")
		r := runCtl(t, nil, "", "-h")
		if r.code != 0 || !strings.Contains(r.stdout, "dlq replay") || !strings.Contains(r.stdout, "-insecure-skip-verify") {
			t.Fatalf("-h: %s", r)
		}
		r = runCtl(t, nil, "", "group", "seek", "-h")
		if r.code != 0 || !strings.Contains(r.stdout, "-to-end") || !strings.Contains(r.stdout, "-timestamp") {
			t.Fatalf("group seek -h: %s", r)
		}
	})
}

// Dead letters: a replay of some by id (moved; again: gone, exit 1), of
// the newest N, and of all of a queue's in pages with progress lines,
// after which the DLQ is empty and every message is back in the queue; a
// purge that is not confirmed changes nothing, one with --yes empties the
// DLQ and reports its progress; seek and delete of a group.
func TestCtlDeadLetterReplayAndPurge(t *testing.T) {
	n := startNode(t, nodeOpts{})
	a := n.api(t)
	const total = 240
	a.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "jobs", "options": map[string]any{"retryLimit": 0}})
	pushN(t, a, "jobs", total, 4, "j")
	deadLetterAll(t, a, "jobs")
	if got := dlqTotal(t, a, "jobs"); got != total {
		t.Fatalf("%d dead letters, want %d", got, total)
	}

	var page struct {
		Messages []struct{ DlqID, PartitionID string }
	}
	a.mustStatus(200, "GET", "/api/v1/dlq?queue=jobs&limit=2", nil).decode(t, &page)
	id1, id2 := page.Messages[0].DlqID, page.Messages[1].DlqID
	r := n.mustCtl(t, "dlq", "replay", id1, id2, "-o", "json")
	var rep struct {
		Results []struct{ Verdict, TransactionID, PartitionID string }
		Tally   struct{ Moved int }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Tally.Moved != 2 || len(rep.Results) != 2 {
		t.Fatalf("%v: %s", err, r)
	}
	for _, res := range rep.Results {
		if res.Verdict != "moved" {
			t.Fatalf("replay: %s", r)
		}
		a.mustStatus(200, "GET", "/api/v1/messages/"+res.PartitionID+"/"+url.PathEscape(res.TransactionID), nil)
	}
	r = n.ctl(t, "dlq", "replay", id1)
	wantFail(t, r, 1, "1 of 1 dead letters were not replayed")
	if !strings.Contains(r.stdout, "HTTP 404: Dead letter not found") {
		t.Fatalf("the second replay: %s", r)
	}
	r = n.mustCtl(t, "dlq", "replay", "--queue", "jobs", "--limit", "10")
	if !strings.Contains(r.stdout, "replayed 10 dead letters of queue jobs") || dlqTotal(t, a, "jobs") != total-12 {
		t.Fatalf("replay --limit 10 (DLQ %d): %s", dlqTotal(t, a, "jobs"), r)
	}

	r = n.mustCtl(t, "dlq", "replay", "--queue", "jobs", "--all", "--page", "50", "--progress-interval", "20ms")
	t.Logf("%s", r)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if lines[0] != fmt.Sprintf("replay: 0/%d dead letters (0%%)", total-12) ||
		!strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("replay: %d dead letters in ", total-12)) {
		t.Fatalf("progress lines: %s", r)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("replayed %d dead letters of queue jobs: moved %d", total-12, total-12)) {
		t.Fatalf("replay --all: %s", r)
	}
	if got := dlqTotal(t, a, "jobs"); got != 0 {
		t.Fatalf("%d dead letters after replay --all", got)
	}
	if tot := a.queueTotals("jobs"); tot["pending"] != total {
		t.Fatalf("after the replays %d messages are pending, want %d: %v", tot["pending"], total, tot)
	}

	// Fail them all again, then purge.
	deadLetterAll(t, a, "jobs")
	if got := dlqTotal(t, a, "jobs"); got != total {
		t.Fatalf("%d dead letters, want %d", got, total)
	}
	r = runCtl(t, nil, "n\n", "--url", n.URL(), "dlq", "purge", "--queue", "jobs")
	wantFail(t, r, 1, "aborted")
	if !strings.Contains(r.stderr, fmt.Sprintf("delete %d dead letters of queue jobs for good? [y/N]", total)) || dlqTotal(t, a, "jobs") != total {
		t.Fatalf("unconfirmed purge: %s", r)
	}
	r = n.mustCtl(t, "dlq", "purge", "--queue", "jobs", "--yes", "-o", "json")
	var purged struct {
		Success bool
		Purged  int
		Queue   string
	}
	if err := json.Unmarshal([]byte(r.stdout), &purged); err != nil || !purged.Success || purged.Purged != total || purged.Queue != "jobs" {
		t.Fatalf("%v: %s", err, r)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("purge: 0/%d dead letters", total)) || !strings.Contains(r.stderr, fmt.Sprintf("purge: %d dead letters in", total)) {
		t.Fatalf("purge progress: %s", r)
	}
	if got := dlqTotal(t, a, "jobs"); got != 0 {
		t.Fatalf("%d dead letters after the purge", got)
	}

	// A group: seek back to the start delivers again; delete asks first.
	pushN(t, a, "events", 5, 1, "e")
	p := a.pop("/api/v1/pop/queue/events", url.Values{"batch": {"5"}, "consumerGroup": {"audit"}, "subscriptionMode": {"all"}})
	a.ackAll(p, strp("audit"))
	r = n.mustCtl(t, "group", "seek", "audit", "events", "--timestamp", "1h")
	if !strings.Contains(r.stdout, "group audit on events: 1 partition cursors moved to") {
		t.Fatalf("seek: %s", r)
	}
	if p := a.pop("/api/v1/pop/queue/events", url.Values{"batch": {"10"}, "consumerGroup": {"audit"}}); p == nil || len(p.Messages) != 5 {
		t.Fatalf("after a seek back an hour: %+v", p)
	}
	n.mustCtl(t, "group", "seek", "audit", "events", "--to-end")
	wantFail(t, runCtl(t, nil, "", "--url", n.URL(), "group", "delete", "audit"), 1, "aborted")
	r = n.mustCtl(t, "group", "delete", "audit", "--queue", "events", "--yes", "-o", "json")
	var del struct {
		Success           bool
		DeletedPartitions int
	}
	if json.Unmarshal([]byte(r.stdout), &del); !del.Success || del.DeletedPartitions != 1 {
		t.Fatalf("group delete: %s", r)
	}
	wantFail(t, n.ctl(t, "group", "audit"), 1, "HTTP 404")
}

// drain pops and acks until the queue is empty, with progress lines and a
// count; unconfirmed it does nothing; for a group it leaves queue mode be.
func TestCtlDrain(t *testing.T) {
	n := startNode(t, nodeOpts{})
	a := n.api(t)
	const total = 150
	pushN(t, a, "poison", total, 3, "x")
	p := a.pop("/api/v1/pop/queue/poison", url.Values{"batch": {"1"}, "consumerGroup": {"late"}, "subscriptionMode": {"all"}})
	a.ackAll(p, strp("late"))

	r := runCtl(t, nil, "", "--url", n.URL(), "drain", "poison")
	wantFail(t, r, 1, "aborted")
	if tot := a.queueTotals("poison"); tot["pending"] != total {
		t.Fatalf("an unconfirmed drain changed the queue: %v", tot)
	}
	r = n.mustCtl(t, "drain", "poison", "--yes", "--limit", "50", "--batch", "30")
	if !strings.Contains(r.stdout, fmt.Sprintf("drained 50 messages of queue poison; %d still pending", total-50)) {
		t.Fatalf("drain --limit 50: %s", r)
	}
	r = n.mustCtl(t, "drain", "poison", "--yes", "--batch", "20", "--progress-interval", "20ms")
	t.Logf("%s", r)
	if !strings.Contains(r.stdout, fmt.Sprintf("drained %d messages of queue poison; 0 still pending", total-50)) {
		t.Fatalf("drain: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if lines[0] != fmt.Sprintf("drain: 0/%d messages (0%%)", total-50) || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("drain: %d messages in", total-50)) {
		t.Fatalf("drain progress: %s", r)
	}
	if tot := a.queueTotals("poison"); tot["pending"] != 0 || tot["completed"] != total {
		t.Fatalf("after the drain: %v", tot)
	}
	r = n.mustCtl(t, "drain", "poison", "--group", "late", "--yes", "-o", "json")
	var out struct {
		Drained, Pending int
		ConsumerGroup    string
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Drained != total-1 || out.Pending != 0 || out.ConsumerGroup != "late" {
		t.Fatalf("%v: %s", err, r)
	}
	var d struct{ Pending int }
	a.mustStatus(200, "GET", "/api/v1/resources/queues/poison/depth?group=late", nil).decode(t, &d)
	if d.Pending != 0 {
		t.Fatalf("group late still has %d pending", d.Pending)
	}
}

// cluster on three nodes: the leader, each node's role, term, applied and
// health, asked at a follower; a node that is down shows as unreachable.
func TestCtlClusterOnThreeNodes(t *testing.T) {
	c := startCluster(t, nodeOpts{})
	lead := c.leader(30 * time.Second)
	follower := c.others(lead)[0]
	// A write through the follower; then every node shows it applied.
	follower.api(t).mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "c1"})
	var lh struct{ Raft struct{ Commit uint64 } }
	must(t, lead.getJSON("/health", 5*time.Second, &lh))
	var view struct {
		Leader struct{ ID string }
		Nodes  []struct {
			ID, HTTPAddr, State string
			Voter, Alive        bool
			Health              struct {
				Status string
				NodeID string
				Raft   struct {
					Role          string
					Term, Applied uint64
				}
			}
		}
	}
	var r ctlRun
	ok, detail := pollUntil(15*time.Second, 100*time.Millisecond, func() (bool, string) {
		r = follower.mustCtl(t, "cluster", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &view); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		for _, nv := range view.Nodes {
			if nv.Health.Raft.Applied < lh.Raft.Commit {
				return false, fmt.Sprintf("%s applied %d < %d", nv.ID, nv.Health.Raft.Applied, lh.Raft.Commit)
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("the nodes do not show the write applied: %s\n%s", detail, r)
	}
	if view.Leader.ID != lead.ID() || len(view.Nodes) != clusterSize {
		t.Fatalf("cluster view (leader %s): %s", lead.ID(), r)
	}
	leaders := 0
	for _, nv := range view.Nodes {
		h := nv.Health
		if h.Status != "healthy" || h.NodeID != nv.ID || !nv.Voter || h.Raft.Term == 0 {
			t.Fatalf("node %s: %s", nv.ID, r)
		}
		if h.Raft.Role == "leader" {
			leaders++
			if nv.ID != lead.ID() {
				t.Fatalf("%s says it leads, the cluster names %s", nv.ID, lead.ID())
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders: %s", leaders, r)
	}
	tab := follower.mustCtl(t, "cluster").stdout
	if !regexp.MustCompile(`leader:\s+` + lead.ID()).MatchString(tab) {
		t.Fatalf("cluster table (leader %s):\n%s", lead.ID(), tab)
	}
	for _, nd := range c.nodes {
		role := "follower"
		if nd == lead {
			role = "leader"
		}
		row := tableRow(tab, nd.ID(), role, "yes", "yes", nd.Addrs().HTTP)
		if row == nil || column(t, tab, row, "HEALTH") != "healthy" {
			t.Fatalf("row of %s (%s):\n%s", nd.ID(), role, tab)
		}
	}

	t.Logf("queen-node ctl cluster:\n%s", tab)
	down := c.others(lead)[1]
	down.kill9()
	tab = follower.mustCtl(t, "cluster").stdout
	t.Logf("with %s down:\n%s", down.ID(), tab)
	row := tableRow(tab, down.ID())
	if row == nil || !strings.HasPrefix(column(t, tab, row, "HEALTH"), "unreachable") {
		t.Fatalf("the killed %s:\n%s", down.ID(), tab)
	}
}

const ctlJWTSecret = "a-test-secret-of-enough-length-for-ctl"

func mintToken(t testing.TB, sub, role string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(ctlJWTSecret)}, nil)
	must(t, err)
	tok, err := jwt.Signed(s).Claims(map[string]any{"sub": sub, "role": role, "exp": time.Now().Add(10 * time.Minute).Unix()}).Serialize()
	must(t, err)
	return tok
}

// JWT on and HTTPS: ctl trusts the CA it is given (--ca), sends the token
// (--token or QUEEN_TOKEN), presents a client certificate (--cert/--key);
// without a token it gets the API's 401, with a read-only one the admin
// purge is 403, without the CA the certificate is refused.
func TestCtlWithJWTAndHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ctl test CA")
	certFile, keyFile := ca.Issue(t, dir, "node")
	caFile := ca.WriteCA(t, dir, "ca.pem")
	opCert, opKey := ca.Issue(t, dir, "operator")
	admin, reader := mintToken(t, "ops", "admin"), mintToken(t, "viewer", "read-only")
	pn, err := nodeproc.NewNode(nodeproc.Spec{Bin: binPath, ID: "n1", DataDir: filepath.Join(dir, "data"),
		LogPath: filepath.Join(dir, "node.log"), ClientTLS: &tls.Config{RootCAs: ca.Pool()}, Token: admin,
		Flags: []string{"--jwt-enabled", "--jwt-secret", ctlJWTSecret, "--tls-cert", certFile, "--tls-key", keyFile}})
	must(t, err)
	n := testNode(t, pn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, n.Start(ctx))
	if !strings.HasPrefix(n.URL(), "https://") {
		t.Fatalf("url %s", n.URL())
	}
	a := n.api(t)
	a.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "secure"})
	pushN(t, a, "secure", 3, 1, "s")

	base := []string{"--url", n.URL(), "--ca", caFile}
	ok := func(r ctlRun) ctlRun {
		t.Helper()
		if r.code != 0 || !strings.Contains(r.stdout, "secure") {
			t.Fatalf("want exit 0 and the queue: %s", r)
		}
		return r
	}
	ok(runCtl(t, nil, "", append(base, "--token", admin, "queues", "-o", "json")...))
	sameJSON(t, "queue over https", ok(runCtl(t, nil, "", append(base, "--token", admin, "queue", "secure", "-o", "json")...)).stdout,
		a.queueDetail("secure"))
	ok(runCtl(t, []string{"QUEEN_TOKEN=" + admin, "QUEEN_URL=" + n.URL()}, "", "--ca", caFile, "queues"))
	ok(runCtl(t, nil, "", append(base, "--token", admin, "--cert", opCert, "--key", opKey, "queues")...))
	ok(runCtl(t, nil, "", "--url", n.URL(), "--insecure-skip-verify", "--token", admin, "queues"))
	ok(runCtl(t, nil, "", append(base, "--token", reader, "queues")...))

	wantFail(t, runCtl(t, nil, "", append(base, "queues")...), 1, "HTTP 401: Authentication required")
	wantFail(t, runCtl(t, nil, "", append(base, "--token", "not.a.token", "queues")...), 1, "HTTP 401")
	wantFail(t, runCtl(t, nil, "", append(base, "--token", reader, "dlq", "purge", "--queue", "secure", "--yes")...), 1,
		"HTTP 403: Insufficient permissions")
	wantFail(t, runCtl(t, nil, "", "--url", n.URL(), "--token", admin, "queues"), 1, "certificate")
	wantFail(t, runCtl(t, nil, "", "--url", "http://"+n.Addrs().HTTP, "--token", admin, "--timeout", "5s", "queues"), 1, "HTTP 400")
	wantFail(t, runCtl(t, nil, "", append(base, "--cert", opCert, "--key", filepath.Join(dir, "missing.key"), "queues")...), 1, "--cert/--key")

	// /health is public; it says JWT is on.
	h := runCtl(t, nil, "", append(base, "health")...)
	if h.code != 0 || !regexp.MustCompile(`jwt:\s+on`).MatchString(h.stdout) {
		t.Fatalf("health: %s", h)
	}
	// An admin token purges.
	if r := runCtl(t, nil, "", append(base, "--token", admin, "dlq", "purge", "--queue", "secure", "--yes")...); r.code != 0 ||
		!strings.Contains(r.stdout, "purged 0 dead letters of queue secure") {
		t.Fatalf("admin purge: %s", r)
	}
}
