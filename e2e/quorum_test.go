package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Losing quorum for good (README, "Operations"): two of three nodes and
// their disks are gone. The operator stops the survivor, runs
// `queen-node recover` with its flags, starts it again as a one-node
// cluster, and grows it back to three by starting new nodes that join it.
// Nothing the survivor had applied is lost.
func TestRecoverFromLosingTwoOfThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{})
	l := c.leader(20 * time.Second)
	var items []pushItem
	for i := range 300 {
		items = append(items, pushItem{Queue: "q", Partition: fmt.Sprint("p", i%3), TransactionID: fmt.Sprint("m", i), Payload: i})
	}
	if r := c.sendRetry(l, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil); r.Status != http.StatusCreated {
		t.Fatalf("push: %s", r)
	}
	group := "billing"
	for range 5 {
		r := c.sendRetry(l, 10*time.Second, "GET", "/api/v1/pop/queue/q?batch=20&consumerGroup=billing&subscriptionMode=all", nil, nil)
		var p popResponse
		r.decode(t, &p)
		l.api(t).ackAll(&p, &group)
	}
	for i := range 20 {
		r := c.sendRetry(l, 10*time.Second, "PUT", fmt.Sprintf("/api/v1/kv/charges/charge:%d", i), map[string]any{"value": map[string]int{"cents": i}, "forever": true}, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("kv put: %s", r)
		}
	}
	survivor := c.nodes[0]
	// The survivor has applied everything acknowledged above.
	ok, detail := pollUntil(10*time.Second, 100*time.Millisecond, func() (bool, string) {
		sv, _ := survivor.Health(context.Background())
		lv, _ := l.Health(context.Background())
		return sv.Raft.StateApplied >= lv.Raft.Commit, fmt.Sprint(sv.Raft, lv.Raft)
	})
	if !ok {
		t.Fatalf("the survivor is behind: %s", detail)
	}
	offsets := survivor.api(t).groupOffsets("billing", "q")

	for _, n := range c.nodes[1:] {
		n.kill9()
		if err := os.RemoveAll(n.DataDir()); err != nil {
			t.Fatal(err)
		}
		c.Forget(n.Node)
	}
	// Without quorum nothing is written.
	r, err := survivor.send(15*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "q", TransactionID: "lost"}}}, nil)
	if err == nil && r.Status == http.StatusCreated {
		t.Fatalf("a push without quorum was acknowledged: %s", r)
	}

	survivor.kill9()
	out, err := queenNode(append([]string{"recover"}, survivor.Args()...)...)
	if err != nil {
		t.Fatalf("queen-node recover: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"recovered": true`) {
		t.Fatalf("recover said: %s", out)
	}
	survivor.restart()
	if got := c.leader(30 * time.Second); got != survivor {
		t.Fatalf("leader %s, want the recovered survivor", got.ID())
	}
	check := func(n *node, what string) {
		t.Helper()
		if got := n.api(t).groupOffsets("billing", "q"); fmt.Sprint(got) != fmt.Sprint(offsets) {
			t.Fatalf("%s: group billing at %v, it was at %v", what, got, offsets)
		}
		for i := range 20 {
			if e := n.api(t).kvGet("charges", fmt.Sprintf("charge:%d", i)); !e.Found {
				t.Fatalf("%s: marker %d lost", what, i)
			}
		}
	}
	check(survivor, "recovered survivor")

	// Grow back to three: two new nodes join it.
	for range 2 {
		pn, err := c.AddNode(context.Background())
		if err != nil {
			t.Fatalf("adding a node: %v", err)
		}
		c.nodes = append(c.nodes, testNode(t, pn))
	}
	awaitSameState(t, c.others(), 30*time.Second)
	delivered := map[string]bool{}
	for _, id := range drainGroup(t, c, c.nodes[3], "q", "verify") {
		delivered[id] = true
	}
	for _, it := range items {
		if !delivered[it.TransactionID] {
			t.Fatalf("%s lost", it.TransactionID)
		}
	}
	// A quorum again: one of the three may fail and writes go on.
	c.nodes[4].kill9()
	if r := c.sendRetry(survivor, 20*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "q", TransactionID: "after"}}}, nil); r.Status != http.StatusCreated {
		t.Fatalf("push after regrowing and losing one: %s", r)
	}
	check(c.nodes[3], "a new node")
	t.Logf("recovered from losing 2 of 3; regrown to %d voters; %d messages and 20 markers kept", 3, len(delivered))
}
