package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// partitionDir is where a partition's message files live in a data dir.
func partitionDir(dataDir, partitionID string) string {
	return filepath.Join(dataDir, "messages", strings.ReplaceAll(partitionID, "-", ""))
}

// retained reads one queen_retention_removed_total sample (0 before the
// first removal).
func (a *api) retained(queue, reason string) float64 {
	a.t.Helper()
	r := a.mustStatus(200, "GET", "/metrics/prometheus", nil)
	prefix := fmt.Sprintf(`queen_retention_removed_total{queue=%q,reason=%q} `, queue, reason)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// What a user sees of retention (spec §5.9): with 2-second sweeps and a
// 10-second retention a message is gone about 12 s after its push, its
// partition's files go with it, a queue with a day's retention beside it
// keeps its own, the sweep's counters are on /metrics/prometheus, and bad
// options are refused with the spec's 400 and change nothing.
func TestRetentionFromOutside(t *testing.T) {
	n := startNode(t, nodeOpts{RetentionIntervalMs: 2000})
	a := n.api(t)
	configure := func(q string, opts map[string]any) *response {
		return a.must("POST", "/api/v1/configure", map[string]any{"queue": q, "options": opts})
	}
	r := configure("short", map[string]any{"retentionEnabled": true, "retentionSeconds": 10})
	if r.Status != 200 || !strings.Contains(string(r.Body), `"dedupWindowSeconds":3600`) || !strings.Contains(string(r.Body), `"retentionSeconds":10`) {
		t.Fatalf("configure: %s", r)
	}
	configure("long", map[string]any{"retentionEnabled": true, "retentionSeconds": 86400})
	for _, bad := range []map[string]any{{"retentionSeconds": -1}, {"completedRetentionSeconds": "ten"},
		{"maxWaitTimeSeconds": 1.5}, {"dedupWindowSeconds": -5}, {"retentionEnabled": "yes"}} {
		r := configure("short", bad)
		if r.Status != http.StatusBadRequest || errCode(r) == "" && !strings.Contains(string(r.Body), `"error"`) {
			t.Fatalf("configure %v: %s, want 400 with an error", bad, r)
		}
	}
	if r := configure("short", map[string]any{}); !strings.Contains(string(r.Body), `"retentionSeconds":10`) ||
		!strings.Contains(string(r.Body), `"maxWaitTimeSeconds":0`) || !strings.Contains(string(r.Body), `"dedupWindowSeconds":3600`) {
		t.Fatalf("a refused configure changed the options: %s", r)
	}

	payload := map[string]any{"pad": strings.Repeat("x", 1000)}
	var items []pushItem
	for i := 0; i < 200; i++ {
		items = append(items, pushItem{Queue: "short", Partition: "p", Payload: payload, TransactionID: fmt.Sprint("s", i)})
	}
	for i := 0; i < 200; i++ {
		items = append(items, pushItem{Queue: "long", Partition: "p", Payload: payload, TransactionID: fmt.Sprint("l", i)})
	}
	res := a.push(items...)
	pushed := time.Now()
	shortDir, longDir := partitionDir(n.DataDir(), res[0].PartitionID), partitionDir(n.DataDir(), res[200].PartitionID)
	if nodeproc.DirBytes(shortDir) < 200*1000 || nodeproc.DirBytes(longDir) < 200*1000 {
		t.Fatalf("message files: short %d, long %d bytes", nodeproc.DirBytes(shortDir), nodeproc.DirBytes(longDir))
	}

	// Poll without consuming: the queue's totals.
	var gone time.Duration
	for time.Since(pushed) < 25*time.Second {
		if tot := a.queueTotals("short"); tot["total"] == 0 {
			gone = time.Since(pushed)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("200 messages with retentionSeconds 10 and 2 s sweeps gone after %v", gone)
	if gone < 9*time.Second || gone > 15*time.Second {
		t.Fatalf("gone after %v, want about 10-12 s", gone)
	}
	if p := a.pop("/api/v1/pop/queue/short", url.Values{"batch": {"10"}}); p != nil {
		t.Fatalf("a pop after retention got %d messages", len(p.Messages))
	}
	// The files go when the state file commits the retention's batch
	// (within fsm.CommitAfter of it, or at the next snapshot).
	var b int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b = nodeproc.DirBytes(shortDir); b == 0 {
			break
		}
	}
	if b != 0 {
		t.Fatalf("the short queue's files hold %d bytes 10 s after retention", b)
	}
	if b := nodeproc.DirBytes(longDir); b < 200*1000 {
		t.Fatalf("the long queue's files lost space: %d bytes", b)
	}
	if tot := a.queueTotals("long"); tot["total"] != 200 {
		t.Fatalf("long queue totals %v", tot)
	}
	if got := a.retained("short", "retention"); got != 200 {
		t.Fatalf("queen_retention_removed_total{short,retention} = %v, want 200", got)
	}

	// The dedup window: a repeat inside it names the original, also one
	// retention removed (a producer's late retry is no new message).
	if r := a.pushOne(pushItem{Queue: "long", Partition: "p", TransactionID: "l7"}, "duplicate"); r.MessageID != res[207].MessageID {
		t.Fatalf("duplicate names %s, want %s", r.MessageID, res[207].MessageID)
	}
	if r := a.pushOne(pushItem{Queue: "short", Partition: "p", TransactionID: "s7"}, "duplicate"); r.MessageID != res[7].MessageID {
		t.Fatalf("a repeat of a removed message names %s, want %s", r.MessageID, res[7].MessageID)
	}
	// Out of the window it is a new message.
	configure("short", map[string]any{"dedupWindowSeconds": 1})
	a.pushOne(pushItem{Queue: "short", Partition: "p", TransactionID: "s8"}, "queued")
}

// A leader killed with SIGKILL while its retention sweeps remove messages:
// the cluster goes on under a new leader, every acknowledged push to a
// queue without retention is there exactly once, the queue with a short
// retention ends empty on every node with its files gone, and nothing the
// sweeps removed comes back.
func TestKill9OfTheLeaderDuringRetentionSweeps(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{RetentionIntervalMs: 200, SnapshotThreshold: 500, SnapshotInterval: 200 * time.Millisecond})
	l := c.leader(20 * time.Second)
	c.sendRetry(l, 10*time.Second, "POST", "/api/v1/configure", map[string]any{"queue": "short",
		"options": map[string]any{"retentionEnabled": true, "retentionSeconds": 2}}, nil)

	kept := map[string]bool{} // txns of "keep" pushes answered 201
	shortPIDs := map[string]bool{}
	push := func(round int, via *node) {
		var items []pushItem
		for i := 0; i < 40; i++ {
			items = append(items, pushItem{Queue: "short", Partition: fmt.Sprint("p", i%8), TransactionID: fmt.Sprintf("s%d-%d", round, i), Payload: map[string]int{"n": i}},
				pushItem{Queue: "keep", Partition: fmt.Sprint("p", i%4), TransactionID: fmt.Sprintf("k%d-%d", round, i)})
		}
		r, err := via.send(5*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
		if err != nil || r.Status != http.StatusCreated {
			return // not acknowledged: the checks ask nothing of it
		}
		var out []pushResult
		r.decode(t, &out)
		for _, it := range out {
			if it.Status == "queued" || it.Status == "duplicate" {
				if strings.HasPrefix(it.TransactionID, "k") {
					kept[it.TransactionID] = true
				} else {
					shortPIDs[it.PartitionID] = true
				}
			}
		}
	}
	round := 0
	// Pushes for 4 s; the sweeps have been removing for about 2 s.
	for start := time.Now(); time.Since(start) < 4*time.Second; round++ {
		push(round, c.others()[round%clusterSize])
		time.Sleep(20 * time.Millisecond)
	}
	la := l.api(t)
	if removed := la.retained("short", "retention"); removed == 0 {
		t.Fatal("no retention sweep removed anything before the kill")
	} else {
		t.Logf("the leader's sweeps removed %v messages before SIGKILL", removed)
	}
	old := l.ID()
	l.kill9() // sweeps are 200 ms apart and a push lands every ~30 ms: mid-pass
	since := time.Now()
	for time.Since(since) < 2*time.Second {
		push(round, c.others()[round%2])
		round++
		time.Sleep(20 * time.Millisecond)
	}
	if _, took, err := c.awaitNewLeader(old, since, 20*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("new leader after %v", took)
	}
	l.restart()
	c.waitRejoined(l, 30*time.Second)

	// After 2 s + sweeps the short queue is empty everywhere, files gone.
	ok, detail := pollUntil(20*time.Second, 250*time.Millisecond, func() (bool, string) {
		for _, n := range c.nodes {
			if tot := n.api(t).queueTotals("short"); tot["total"] != 0 {
				return false, fmt.Sprintf("%s: short totals %v", n.ID(), tot)
			}
			for pid := range shortPIDs {
				if b := nodeproc.DirBytes(partitionDir(n.DataDir(), pid)); b != 0 {
					return false, fmt.Sprintf("%s: partition %s still holds %d bytes", n.ID(), pid, b)
				}
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("the short queue did not empty on every node: %s", detail)
	}
	for _, n := range c.nodes {
		if p := n.api(t).pop("/api/v1/pop/queue/short", url.Values{"batch": {"100"}}); p != nil {
			t.Fatalf("%s: removed messages came back: %d", n.ID(), len(p.Messages))
		}
	}
	// Every acknowledged push to "keep" is there exactly once.
	seen := map[string]int{}
	a := c.leader(10 * time.Second).api(t)
	for i := 0; i < 200; i++ {
		p := a.pop("/api/v1/pop/queue/keep", url.Values{"batch": {"1000"}, "partitions": {"10"}})
		if p == nil {
			break
		}
		for _, m := range p.Messages {
			seen[m.TransactionID]++
		}
		a.ackAll(p, nil)
	}
	for txn := range kept {
		if seen[txn] != 1 {
			t.Errorf("acknowledged push %s delivered %d times", txn, seen[txn])
		}
	}
	t.Logf("%d acknowledged pushes to keep, all delivered once; %d short partitions emptied on 3 nodes", len(kept), len(shortPIDs))
}
