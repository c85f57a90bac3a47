package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// A node that was down takes its group back (the balancer hands a group to
// its preferred voter as soon as that voter's log has caught up), before
// its state machine has applied what the others committed meanwhile. Entry
// time must go on moving under it: a lease granted just before it came
// back ends on time and the message is delivered again. A jepsen run found
// entry time standing still for 20 s after such an election (the new
// leader's clock anchored near its own old stamp, and every stamp was the
// last applied one plus 1µs until slewing caught up): a drain found
// partitions still leased and stopped.
func TestEntryTimeMovesWhenARestartedNodeTakesItsGroupBack(t *testing.T) {
	const groups = 2
	c := startGroupsCluster(t, groups, "--default-subscription-mode", "all")
	team := tenantsInGroups(groups)[1]
	hdr := map[string]string{"x-queen-tenant": team}
	// startGroupsCluster waited until every group is led by its preferred
	// voter, the one the balancer hands the group back to.
	ids := votersInIDOrder(c)
	var back *node
	for _, n := range c.nodes {
		if n.ID() == ids[1%len(ids)] {
			back = n
		}
	}
	via := c.others(back)[0]
	if r := c.sendRetry(via, 10*time.Second, http.MethodPost, "/api/v1/configure",
		map[string]any{"queue": "leased", "options": map[string]any{"leaseTime": 2}}, hdr); r.Status != http.StatusOK {
		t.Fatalf("configure: %s", r)
	}

	back.sigterm(30 * time.Second)
	if ok, why := pollUntil(30*time.Second, 200*time.Millisecond, func() (bool, string) {
		ls := groupLeaders(t, via)
		return len(ls) == groups && ls[1] != "" && ls[1] != back.ID(), fmt.Sprint(ls)
	}); !ok {
		t.Fatalf("group 1 has no other leader: %s", why)
	}
	// The others go on for a while: enough entries that the node coming
	// back takes seconds to apply them.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := queen.New(c.others(back)[w%2].URL(), queen.WithTenant(team), queen.WithLeaderRouting(false))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			msgs := make([]queen.Msg, 100)
			for i := range msgs {
				msgs[i] = queen.Msg{Data: map[string]any{"w": w, "i": i, "pad": "0123456789abcdef0123456789abcdef"}}
			}
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
				if _, err := cl.Queue("bulk").Push(ctx, msgs...); err != nil {
					t.Errorf("push while %s is down: %v", back.ID(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// A lease granted just before the node comes back, never acked.
	if r := c.sendRetry(via, 10*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []map[string]any{{"queue": "leased", "transactionId": "m1", "payload": map[string]any{"n": 1}}}}, hdr); r.Status != http.StatusCreated {
		t.Fatalf("push m1: %s", r)
	}
	first := c.sendRetry(via, 10*time.Second, http.MethodGet, "/api/v1/pop/queue/leased?consumerGroup=g&batch=1", nil, hdr)
	if first.Status != http.StatusOK {
		t.Fatalf("first pop of m1: %s", first)
	}
	leasedAt := time.Now()

	back.restart()
	if ok, why := pollUntil(60*time.Second, 50*time.Millisecond, func() (bool, string) {
		ls := groupLeaders(t, back)
		return len(ls) == groups && ls[1] == back.ID(), fmt.Sprint(ls)
	}); !ok {
		t.Fatalf("%s did not take group 1 back: %s", back.ID(), why)
	}
	// A write it leads returns once everything before it applied there.
	if r := c.sendRetry(back, 30*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []map[string]any{{"queue": "after", "payload": map[string]any{"n": 1}}}}, hdr); r.Status != http.StatusCreated {
		t.Fatalf("push through %s after it took group 1 back: %s", back.ID(), r)
	}
	tookBack := time.Now()
	// The lease ran out two seconds after it was granted. Entry time goes
	// on from the last stamp the others applied at the pace of real time
	// (it never jumps ahead to a wall clock: cluster/clock.go), so m1 is
	// delivered again at most about the lease's two seconds after the
	// takeover. Entry time standing still would hold the lease for about
	// as long as the node was away (6 s late in a run of the old clock).
	r := c.sendRetry(back, 30*time.Second, http.MethodGet, "/api/v1/pop/queue/leased?consumerGroup=g&batch=1&wait=true&timeout=15000", nil, hdr)
	got := time.Now()
	var p popResponse
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "m1" {
		t.Fatalf("m1 was not delivered again after its lease ran out (pop answered %s); %s took group 1 back %v after the lease was granted",
			r, back.ID(), tookBack.Sub(leasedAt))
	}
	if late := got.Sub(maxTime(tookBack, leasedAt.Add(2*time.Second))); late > 4*time.Second {
		t.Fatalf("m1 came back %v after its lease ran out and %s led group 1: entry time stood still", late, back.ID())
	}
	t.Logf("%s took group 1 back %v after the lease was granted; m1 came back %v after that", back.ID(), tookBack.Sub(leasedAt), got.Sub(tookBack))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
