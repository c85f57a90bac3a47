package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// The Go client given the nodes of a cluster sends its calls to the leader
// the nodes name (GET /health's leaderHttp), not through a follower's
// forwarding; when the leader is killed it goes on through the others and
// finds the new leader.
func TestTheClientSendsItsCallsToTheLeader(t *testing.T) {
	c := startCluster(t, nodeOpts{})
	lead := c.leader(30 * time.Second)
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, n.URL())
	}
	cl, err := queen.New(strings.Join(urls, ","), queen.WithRetry(queen.RetryPolicy{MaxAttempts: -1, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	served := func() map[string]float64 {
		out := map[string]float64{}
		for _, n := range c.nodes {
			if n.Running() {
				out[n.ID()] = n.api(t).metric("queen_http_requests_total")
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	push := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := cl.Queue("routed").Push(ctx, queen.Msg{TransactionID: fmt.Sprint("r-", i), Data: i}); err != nil {
				t.Fatalf("push %d: %v", i, err)
			}
		}
	}
	push(0, 5) // the client learns the leader meanwhile
	time.Sleep(200 * time.Millisecond)
	before := served()
	push(5, 100)
	after := served()
	for id, v := range after {
		got := v - before[id]
		switch {
		case id == lead.ID() && got < 100:
			t.Errorf("the leader %s served %v of the 100 pushes", id, got)
		case id != lead.ID() && got > 20: // its own metrics reads and a few /health asks
			t.Errorf("follower %s served %v requests during 100 pushes: they were forwarded", id, got)
		}
	}

	// The leader dies: the client goes on through the others.
	lead.kill9()
	push(105, 50)
	next := c.leader(30 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		before = served()
		push(155+int(time.Now().UnixNano()%1000)*1000, 50)
		after = served()
		if after[next.ID()]-before[next.ID()] >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader %s served %v of 50 pushes", next.ID(), after[next.ID()]-before[next.ID()])
		}
	}
	msgs, err := cl.Queue("routed").Pop(ctx, queen.PopOptions{Batch: 1000, Wait: time.Second})
	if err != nil || len(msgs) < 155 {
		t.Fatalf("popped %d: %v", len(msgs), err)
	}
}
