package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestMarkerRaceOverHTTP races two workers for one order's marker.
//
// (a) Worker A's lease runs out while it charges; worker B pops the order
// under a new lease and commits marker + ack. A's late commit is refused as
// rejected_ack, both before and after B's commit, and the marker holds B's
// value: the lease fences what a compare-and-set on the marker alone could
// not.
//
// (b) One order arrives twice, in two partitions, and two workers holding
// valid leases commit the same marker key at the same moment. Exactly one
// wins; the other's whole transaction rolls back with kv_precondition, its
// ack included, so its message comes back once its lease runs out.
func TestMarkerRaceOverHTTP(t *testing.T) {
	n := startNode(t, nodeOpts{})

	t.Run("lease ran out while charging", func(t *testing.T) {
		c := n.api(t)
		const (
			queue = "race-slow-charge"
			ns    = "race-slow-charge"
			group = "charger"
			key   = "charge:ORD-A"
			lease = time.Second
		)
		c.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{
			"queue": queue, "options": map[string]any{"leaseTime": int(lease / time.Second), "retryLimit": 5},
		})
		c.pushOne(pushItem{Queue: queue, TransactionID: "order-ORD-A", Payload: map[string]any{"orderId": "ORD-A", "cents": 1000}}, "queued")

		// Worker A pops, finds no marker, and starts charging.
		a := c.popOne(queue, "", group, 2*time.Second)
		if a == nil {
			t.Fatal("worker A: empty pop")
		}
		aPopped := time.Now()
		if c.kvGet(ns, key).Found {
			t.Fatal("a marker exists before anyone charged")
		}

		// The card network is slow: A's lease runs out, and worker B, in the
		// same group, gets the order under a new lease. B's pop parks until
		// then (nothing else is deliverable: the partition is A's).
		b := c.popOne(queue, "", group, 5*time.Second)
		if b == nil {
			t.Fatal("worker B: no redelivery within 5 s of a 1 s lease")
		}
		if b.TransactionID != a.TransactionID || b.PartitionID != a.PartitionID {
			t.Fatalf("worker B got %s/%s, want A's order %s/%s", b.PartitionID, b.TransactionID, a.PartitionID, a.TransactionID)
		}
		if b.LeaseID == a.LeaseID {
			t.Fatalf("worker B got the order under A's lease %s; want a new lease", a.LeaseID)
		}
		if since := time.Since(aPopped); since < lease-100*time.Millisecond {
			t.Errorf("worker B got the order %v after A's pop, before A's %v lease could end", since, lease)
		}
		if c.kvGet(ns, key).Found {
			t.Fatal("a marker exists before anyone committed")
		}

		// A finishes charging while B holds the order and commits: refused,
		// nothing written, so no marker.
		v := c.commit(markerCommit(*a, group, ns, key, chargeValue{ChargeID: "ch_A", Cents: 1000}))
		if v.Success || v.Reason != "rejected_ack" {
			t.Fatalf("A's commit under an expired lease (B holds the order): success=%v reason=%q error=%q; want success=false reason=rejected_ack",
				v.Success, v.Reason, v.Error)
		}
		if e := c.kvGet(ns, key); e.Found {
			t.Fatalf("A's refused commit left a marker: %s", e.Value)
		}

		// B, who owns the order now, commits.
		v = c.commit(markerCommit(*b, group, ns, key, chargeValue{ChargeID: "ch_B", Cents: 1000}))
		if !v.Success {
			t.Fatalf("B's commit under its live lease: reason=%q error=%q; want success", v.Reason, v.Error)
		}
		before := c.kvGet(ns, key)
		if !before.Found || decodeCharge(t, before.Value).ChargeID != "ch_B" {
			t.Fatalf("after B's commit the marker is found=%v %s; want ch_B", before.Found, before.Value)
		}

		// A's late commit again, after B's: still rejected_ack (the ack is
		// judged first), and the marker keeps B's value and version.
		r := c.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", markerCommit(*a, group, ns, key, chargeValue{ChargeID: "ch_A", Cents: 1000}))
		r.decode(t, &v)
		if v.Success || v.Reason != "rejected_ack" {
			t.Fatalf("A's late commit after B's: %s; want HTTP 200 success=false reason=rejected_ack", r)
		}
		after := c.kvGet(ns, key)
		if !after.Found || decodeCharge(t, after.Value).ChargeID != "ch_B" || after.Version != before.Version {
			t.Fatalf("after A's late commit the marker is found=%v %s version %s; want B's ch_B at version %s",
				after.Found, after.Value, after.Version, before.Version)
		}

		// The order is consumed: the group gets nothing more, even after
		// A's dead lease would have run out twice over.
		if m := c.popOne(queue, "", group, lease+500*time.Millisecond); m != nil {
			t.Fatalf("group %s got %s again after B's commit", group, m.TransactionID)
		}
	})

	t.Run("same marker, two partitions, concurrent commits", func(t *testing.T) {
		c := n.api(t)
		const (
			rounds = 20
			group  = "charger"
			ns     = "race-concurrent"
			lease  = 2 * time.Second
		)
		type loser struct {
			queue, partition string
			msg              popMessage
			winner           string
		}
		var losers []loser
		for i := 0; i < rounds; i++ {
			queue := fmt.Sprintf("race-concurrent-%02d", i)
			order := fmt.Sprintf("ORD-%02d", i)
			key := "charge:" + order
			c.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{
				"queue": queue, "options": map[string]any{"leaseTime": int(lease / time.Second), "retryLimit": 5},
			})
			// One order, two messages: a producer that re-sent it to
			// another partition. (Dedup is per partition, so both are
			// stored.)
			for _, p := range []string{"east", "west"} {
				c.pushOne(pushItem{Queue: queue, Partition: p, TransactionID: "order-" + order,
					Payload: map[string]any{"orderId": order, "cents": 1000 + i}}, "queued")
			}
			// Two workers of one group: each pop claims the partition the
			// other does not hold.
			m1 := c.popOne(queue, "", group, 2*time.Second)
			m2 := c.popOne(queue, "", group, 2*time.Second)
			if m1 == nil || m2 == nil {
				t.Fatalf("round %d: the two workers got %v and %v, want one message each", i, m1 != nil, m2 != nil)
			}
			if m1.PartitionID == m2.PartitionID || m1.LeaseID == m2.LeaseID {
				t.Fatalf("round %d: both workers got partition %s (leases %s, %s); want one partition and one lease each",
					i, m1.PartitionID, m1.LeaseID, m2.LeaseID)
			}
			msgs := [2]popMessage{*m1, *m2}
			names := [2]string{"ch_" + m1.Partition, "ch_" + m2.Partition}

			// Fire both commits at the same moment.
			var verdicts [2]txnVerdict
			var errs [2]error
			gate := make(chan struct{})
			var wg sync.WaitGroup
			for w := 0; w < 2; w++ {
				body := markerCommit(msgs[w], group, ns, key, chargeValue{ChargeID: names[w], Cents: 1000 + i})
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					r, err := n.do(ctx, "POST", "/api/v1/transaction", body)
					switch {
					case err != nil:
						errs[w] = err
					case r.Status != http.StatusOK:
						errs[w] = fmt.Errorf("HTTP %s", r)
					default:
						errs[w] = json.Unmarshal(r.Body, &verdicts[w])
					}
				}()
			}
			close(gate)
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("round %d, worker %d: commit: %v", i, w+1, err)
				}
			}

			wins := 0
			win, lose := -1, -1
			for w, v := range verdicts {
				switch {
				case v.Success:
					wins++
					win = w
				case v.Reason == "kv_precondition":
					lose = w
				default:
					t.Errorf("round %d, worker %d: success=false reason=%q error=%q; want success or kv_precondition", i, w+1, v.Reason, v.Error)
				}
			}
			if wins != 1 || win < 0 || lose < 0 {
				t.Fatalf("round %d: %d commits won (verdicts %+v, %+v); want exactly one winner and one kv_precondition", i, wins, verdicts[0], verdicts[1])
			}
			lv := verdicts[lose]
			if lv.KVReason != "exists" {
				t.Errorf("round %d: the losing verdict's kvReason is %q, want exists", i, lv.KVReason)
			}
			if got := decodeCharge(t, lv.Value).ChargeID; got != names[win] {
				t.Errorf("round %d: the losing verdict shows the marker value %q, want the winner's %q", i, got, names[win])
			}
			if e := c.kvGet(ns, key); !e.Found || decodeCharge(t, e.Value).ChargeID != names[win] {
				t.Errorf("round %d: the marker is found=%v %s, want the winner's %q", i, e.Found, e.Value, names[win])
			}
			// The winner's partition is consumed and released.
			if m := c.popOne(queue, msgs[win].Partition, group, 0); m != nil {
				t.Errorf("round %d: the winner's partition %s delivered %s again", i, msgs[win].Partition, m.TransactionID)
			}
			losers = append(losers, loser{queue: queue, partition: msgs[lose].Partition, msg: msgs[lose], winner: names[win]})
		}

		// The losers' messages were not acked: once their leases run out,
		// the group gets each one again, under a new lease. Handled with
		// the pattern, each finds the marker and is acked on its own.
		for i, l := range losers {
			m := c.popOne(l.queue, l.partition, group, lease+3*time.Second)
			if m == nil {
				t.Errorf("round %d: the kv_precondition loser's message in %s/%s never came back: it was acked with the rolled-back transaction",
					i, l.queue, l.partition)
				continue
			}
			if m.TransactionID != l.msg.TransactionID || m.PartitionID != l.msg.PartitionID || m.LeaseID == l.msg.LeaseID {
				t.Errorf("round %d: redelivery %s/%s lease %s; want %s/%s under a new lease",
					i, m.PartitionID, m.TransactionID, m.LeaseID, l.msg.PartitionID, l.msg.TransactionID)
				continue
			}
			e := c.kvGet(ns, "charge:"+fmt.Sprintf("ORD-%02d", i))
			if !e.Found || decodeCharge(t, e.Value).ChargeID != l.winner {
				t.Errorf("round %d: on redelivery the marker is found=%v %s, want %q", i, e.Found, e.Value, l.winner)
			}
			grp := group
			if res := c.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &grp, LeaseID: m.LeaseID, Status: "completed"}); !res.Success {
				t.Errorf("round %d: ack of the redelivered loser refused: %s", i, deref(res.Error))
			}
			if m := c.popOne(l.queue, "", group, 0); m != nil {
				t.Errorf("round %d: %s still delivers %s/%s after both messages were acked", i, l.queue, m.Partition, m.TransactionID)
			}
		}
	})
}
