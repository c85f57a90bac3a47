package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/cluster"
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

// Losing quorum for good with --raft-groups 3: `queen-node recover` on the
// survivor recovers every group its data dir holds (each has its own log
// and configuration), so that, started again alone, it leads all three
// and every tenant keeps what it had and takes writes again.
func TestRecoverEveryRaftGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	const groups = 3
	c := startGroupsCluster(t, groups)
	tenants := tenantsInGroups(groups)
	survivor := c.nodes[0]
	mark := func(name, key string) int {
		r, err := survivor.send(20*time.Second, "PUT", "/api/v1/kv/charges/"+key, map[string]any{"value": name, "forever": true},
			map[string]string{"x-queen-tenant": name})
		if err != nil {
			return 0
		}
		return r.Status
	}
	for _, name := range tenants {
		for i := range 10 {
			if st := mark(name, fmt.Sprint("charge:", i)); st != http.StatusOK {
				t.Fatalf("%s: kv put: %d", name, st)
			}
		}
	}
	// every group's entries are applied on the survivor
	health := func(n *node) []cluster.GroupStatus {
		var h groupsHealth
		r, err := n.send(5*time.Second, "GET", "/health", nil, nil)
		if err != nil || json.Unmarshal(r.Body, &h) != nil {
			return nil
		}
		return h.Groups
	}
	ok, detail := pollUntil(15*time.Second, 100*time.Millisecond, func() (bool, string) {
		mine := health(survivor)
		for _, n := range c.nodes {
			for g, st := range health(n) {
				if st.Role == "leader" && (len(mine) != groups || mine[g].Applied < st.CommitIndex) {
					return false, fmt.Sprintf("group %d: leader %s at %d, survivor %+v", g, n.ID(), st.CommitIndex, mine)
				}
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("the survivor is behind: %s", detail)
	}
	for _, n := range c.nodes[1:] {
		n.kill9()
		if err := os.RemoveAll(n.DataDir()); err != nil {
			t.Fatal(err)
		}
		c.Forget(n.Node)
	}
	survivor.kill9()
	out, err := queenNode(append([]string{"recover"}, survivor.Args()...)...)
	if err != nil || !strings.Contains(out, `"recovered": true`) {
		t.Fatalf("queen-node recover: %v\n%s", err, out)
	}
	survivor.restart()
	ok, detail = pollUntil(30*time.Second, 200*time.Millisecond, func() (bool, string) {
		ls := groupLeaders(t, survivor)
		return strings.Join(ls, ",") == strings.Repeat(survivor.ID()+",", groups-1)+survivor.ID(), fmt.Sprint(ls)
	})
	if !ok {
		t.Fatalf("the recovered node does not lead every group: %s", detail)
	}
	for _, name := range tenants {
		for i := range 10 {
			r, err := survivor.send(10*time.Second, "GET", fmt.Sprint("/api/v1/kv/charges/charge:", i), nil,
				map[string]string{"x-queen-tenant": name})
			if err != nil || r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"`+name+`"`) {
				t.Fatalf("%s: marker %d after the recovery: %v %s", name, i, err, r)
			}
		}
		if st := mark(name, "after"); st != http.StatusOK {
			t.Fatalf("%s: a write after the recovery: %d", name, st)
		}
	}
	t.Logf("recovered %d groups; %d tenants kept their markers and write again", groups, len(tenants))
}
