package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Operator writes on a real cluster: a seek interrupted by SIGKILL of the
// leader is all or nothing, and push maintenance loses and repeats nothing
// across a leader change and kills of any node.

// groupOffsets reads, from n, the consumed offset of group in every
// partition of queue q (partition name -> offset).
func (a *api) groupOffsets(group, q string) map[string]int {
	a.t.Helper()
	r := a.must("GET", "/api/v1/consumer-groups/"+url.PathEscape(group)+"?consistency=stale", nil)
	if r.Status != http.StatusOK {
		a.t.Fatalf("group detail: %s", r)
	}
	var d struct {
		Queues []struct {
			QueueName  string `json:"queueName"`
			Partitions []struct {
				Partition      string `json:"partition"`
				ConsumedOffset int    `json:"consumedOffset"`
			} `json:"partitions"`
		} `json:"queues"`
	}
	r.decode(a.t, &d)
	out := map[string]int{}
	for _, qv := range d.Queues {
		if qv.QueueName == q {
			for _, p := range qv.Partitions {
				out[p.Partition] = p.ConsumedOffset
			}
		}
	}
	return out
}

// drainGroup pops and acks everything group g sees in q through n; it
// returns the transactionIds delivered, in delivery order.
func drainGroup(t testing.TB, c *testCluster, n *node, q, g string) []string {
	t.Helper()
	var got []string
	for range 1000 {
		r := c.sendRetry(n, 20*time.Second, "GET", "/api/v1/pop/queue/"+q+"?batch=200&partitions=8&consumerGroup="+g+"&subscriptionMode=all", nil, nil)
		if r.Status == http.StatusNoContent {
			return got
		}
		var p popResponse
		r.decode(t, &p)
		acks := make([]ackReq, len(p.Messages))
		for i, m := range p.Messages {
			got = append(got, m.TransactionID)
			acks[i] = ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "completed"}
		}
		ar := c.sendRetry(n, 20*time.Second, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": g, "acknowledgments": acks}, nil)
		if ar.Status != http.StatusOK {
			t.Fatalf("ack batch: %s", ar)
		}
	}
	t.Fatal("drainGroup did not finish")
	return nil
}

// A seek of eight partitions is one entry. SIGKILL of the leader while it
// is in flight leaves every partition of the group at the old position or
// every one at the new, on every node, never a mix.
func TestKill9OfTheLeaderMidSeek(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{})
	l := c.leader(20 * time.Second)
	push := func(prefix string) {
		var items []pushItem
		for p := range 8 {
			for i := range 10 {
				items = append(items, pushItem{Queue: "seek", Partition: fmt.Sprint("p", p), TransactionID: fmt.Sprintf("%s-%d-%d", prefix, p, i), Payload: i})
			}
		}
		if r := c.sendRetry(l, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil); r.Status != http.StatusCreated {
			t.Fatalf("push: %s", r)
		}
	}
	push("early")
	time.Sleep(50 * time.Millisecond)
	mid := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(50 * time.Millisecond)
	push("late")
	if got := drainGroup(t, c, l, "seek", "g"); len(got) != 160 {
		t.Fatalf("first pass delivered %d, want 160", len(got))
	}

	for round := range 2 {
		l = c.leader(20 * time.Second)
		via := c.others(l)[0]
		// Every partition at its end (20) before; the seek moves all to 10.
		c.sendRetry(via, 10*time.Second, "POST", "/api/v1/consumer-groups/g/queues/seek/seek", map[string]any{"toEnd": true}, nil)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			via.send(5*time.Second, "POST", "/api/v1/consumer-groups/g/queues/seek/seek", map[string]any{"timestamp": mid}, nil)
		}()
		time.Sleep(time.Duration(round) * 3 * time.Millisecond)
		old := l.ID()
		l.kill9()
		wg.Wait()
		if _, _, err := c.awaitNewLeader(old, time.Now(), 20*time.Second); err != nil {
			t.Fatal(err)
		}
		l.restart()
		c.waitRejoined(l, 30*time.Second)
		// Every read of every node sees one position for all eight
		// partitions; the nodes agree once each applied the same log.
		var first map[string]int
		ok, detail := pollUntil(10*time.Second, 100*time.Millisecond, func() (bool, string) {
			first = nil
			for _, n := range c.nodes {
				offs := n.api(t).groupOffsets("g", "seek")
				if len(offs) != 8 {
					t.Fatalf("%s: %d partitions in the group view, want 8: %v", n.ID(), len(offs), offs)
				}
				vals := map[int]bool{}
				for _, o := range offs {
					vals[o] = true
				}
				if len(vals) != 1 || !(vals[10] || vals[20]) {
					t.Fatalf("round %d, %s: a mix of positions after the kill: %v", round, n.ID(), offs)
				}
				if first == nil {
					first = offs
				} else if fmt.Sprint(first) != fmt.Sprint(offs) {
					return false, fmt.Sprintf("nodes disagree: %v vs %v", first, offs)
				}
			}
			return true, ""
		})
		if !ok {
			t.Fatal(detail)
		}
		t.Logf("round %d: after the kill every partition sits at %d", round, first["p0"])
	}
	// Whatever the last seek did, what follows the position is delivered.
	offs := c.nodes[0].api(t).groupOffsets("g", "seek")
	want := 0
	if offs["p0"] == 10 {
		want = 80
	}
	if got := drainGroup(t, c, c.leader(20*time.Second), "seek", "g"); len(got) != want {
		t.Fatalf("after the seeks delivered %d, want %d", len(got), want)
	}
}

// Push maintenance (spec §4.14) on a cluster: pushes through every node
// answer "buffered" and stay invisible while the leader is killed and a
// follower is killed; a producer retries what got no answer with the same
// transactionIds. When maintenance ends every acknowledged push is
// delivered exactly once, in each partition in the order it was buffered.
func TestPushMaintenanceSurvivesKillsAndALeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{})
	l := c.leader(20 * time.Second)
	if r := c.sendRetry(l, 10*time.Second, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}, nil); r.Status != 200 {
		t.Fatalf("maintenance on: %s", r)
	}
	acked := map[string]bool{}
	var order []string // acknowledged, in answer order, per partition checked later
	batch := 0
	push := func() {
		var items []pushItem
		for i := range 10 {
			items = append(items, pushItem{Queue: "mq", Partition: fmt.Sprint("p", i%2), TransactionID: fmt.Sprintf("b%03d-%d", batch, i), Payload: i})
		}
		batch++
		// Retry the same batch until it is answered: the dedup window makes
		// the retry safe.
		for attempt := range 50 {
			n := c.others()[(batch+attempt)%len(c.others())]
			r, err := n.send(3*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
			if err != nil || r.Status != http.StatusCreated {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			var out []pushResult
			r.decode(t, &out)
			for _, it := range out {
				if it.Status != "buffered" {
					t.Fatalf("push during maintenance answered %q for %s", it.Status, it.TransactionID)
				}
				if !acked[it.TransactionID] {
					order = append(order, it.TransactionID)
				}
				acked[it.TransactionID] = true
			}
			return
		}
		t.Fatal("a push got no answer for 50 attempts")
	}
	for range 10 {
		push()
	}
	old := l.ID()
	l.kill9()
	for range 10 {
		push() // through the followers while they elect
	}
	if _, _, err := c.awaitNewLeader(old, time.Now(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	l.restart()
	c.waitRejoined(l, 30*time.Second)
	nl := c.leader(20 * time.Second)
	f := c.others(nl)[0]
	f.kill9()
	for range 10 {
		push()
	}
	f.restart()
	c.waitRejoined(f, 30*time.Second)
	// Still invisible on every node.
	for _, n := range c.nodes {
		if r := c.sendRetry(n, 10*time.Second, "GET", "/api/v1/pop/queue/mq?consumerGroup=peek&subscriptionMode=all", nil, nil); r.Status != http.StatusNoContent {
			t.Fatalf("%s: a pop during maintenance found messages: %s", n.ID(), r)
		}
		var st map[string]any
		if err := n.getJSON("/api/v1/system/maintenance?consistency=stale", 5*time.Second, &st); err != nil || st["maintenanceMode"] != true {
			t.Fatalf("%s: maintenance status %v %v", n.ID(), st, err)
		}
	}
	r := c.sendRetry(c.nodes[1], 20*time.Second, "POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"maintenanceMode":false`) {
		t.Fatalf("maintenance off: %s", r)
	}
	got := drainGroup(t, c, c.nodes[2], "mq", "consumer")
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("%s: delivered %d times, want 1", id, seen[id])
		}
	}
	for id, n := range seen {
		if !acked[id] || n != 1 {
			t.Errorf("%s delivered %d times (acknowledged: %v)", id, n, acked[id])
		}
	}
	// Within a partition, delivery follows the order the buffer took them.
	byPart := func(ids []string) map[string][]string {
		m := map[string][]string{}
		for _, id := range ids {
			p := id[strings.LastIndexByte(id, '-')+1:]
			k := "odd"
			if strings.Contains("02468", p) {
				k = "even"
			}
			m[k] = append(m[k], id)
		}
		return m
	}
	want, have := byPart(order), byPart(got)
	for k := range want {
		if !sort.StringsAreSorted(want[k]) || strings.Join(want[k], ",") != strings.Join(have[k], ",") {
			t.Fatalf("partition %s: delivered out of buffer order:\n got  %v\n want %v", k, have[k], want[k])
		}
	}
	t.Logf("%d pushes acknowledged as buffered across 2 kills and a leader change; each delivered once, in order", len(acked))
}
