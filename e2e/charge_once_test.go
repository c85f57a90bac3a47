package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// Helpers for the exactly-once tests: the marker reads and the
// marker + ack transaction, on the wire of spec §4.5 and §4.7.

// txnVerdict is the answer of POST /api/v1/transaction.
type txnVerdict struct {
	TransactionID string          `json:"transactionId"`
	Success       bool            `json:"success"`
	Reason        string          `json:"reason"`
	Error         string          `json:"error"`
	FailedIndex   *int            `json:"failedIndex"`
	KVReason      string          `json:"kvReason"`
	Value         json.RawMessage `json:"value"`
	Results       []struct {
		Type    string `json:"type"`
		Success bool   `json:"success"`
	} `json:"results"`
}

// markerCommit is the body of a marker + ack transaction: the ack of m
// under its own lease, and a required putIfAbsent of the marker. The kv
// array is a key of the root, beside operations.
func markerCommit(m popMessage, group, ns, key string, value any) map[string]any {
	return map[string]any{
		"operations": []any{map[string]any{
			"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"consumerGroup": group, "leaseId": m.LeaseID, "status": "completed",
		}},
		"kv": []any{map[string]any{
			"op": "putIfAbsent", "ns": ns, "key": key, "value": value,
			"ttlSeconds": 3600, "required": true,
		}},
	}
}

// commit posts a transaction and requires HTTP 200: every verdict, the
// refusals included, is a 200 (spec §4.5).
func (a *api) commit(body any) txnVerdict {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", body)
	var v txnVerdict
	r.decode(a.t, &v)
	return v
}

// kvEntry is one result of a KV get.
type kvEntry struct {
	Found   bool            `json:"found"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version json.Number     `json:"version"`
}

// kvGet reads one key through POST /api/v1/kv, as the seed does.
func (a *api) kvGet(ns, key string) kvEntry {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/kv", map[string]any{
		"operations": []any{map[string]any{"op": "get", "ns": ns, "key": key}},
	})
	var out struct {
		Results []kvEntry `json:"results"`
	}
	r.decode(a.t, &out)
	if len(out.Results) != 1 {
		a.t.Fatalf("kv get %s/%s: %d results, want 1: %s", ns, key, len(out.Results), r)
	}
	return out.Results[0]
}

// kvGetMany reads keys in one getMany op.
func (a *api) kvGetMany(ns string, keys []string) (rows []kvEntry, missing []string) {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/kv", map[string]any{
		"operations": []any{map[string]any{"op": "getMany", "ns": ns, "keys": keys}},
	})
	var out struct {
		Results []struct {
			Rows    []kvEntry `json:"rows"`
			Missing []string  `json:"missing"`
		} `json:"results"`
	}
	r.decode(a.t, &out)
	if len(out.Results) != 1 {
		a.t.Fatalf("kv getMany: %d results, want 1: %s", len(out.Results), r)
	}
	return out.Results[0].Rows, out.Results[0].Missing
}

// chargeValue is what a marker holds: the charge it stands for.
type chargeValue struct {
	ChargeID string `json:"chargeId"`
	Cents    int    `json:"cents"`
}

func decodeCharge(t testing.TB, raw json.RawMessage) chargeValue {
	t.Helper()
	var v chargeValue
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("marker value %s: %v", raw, err)
	}
	return v
}

// popOne long-polls one message for group (subscriptionMode=all, batch 1)
// from the whole queue, or from one partition when partition is set. It
// returns nil on 204.
func (a *api) popOne(queue, partition, group string, wait time.Duration) *popMessage {
	a.t.Helper()
	path := "/api/v1/pop/queue/" + queue
	if partition != "" {
		path += "/partition/" + partition
	}
	q := qv("consumerGroup", group, "subscriptionMode", "all", "batch", "1")
	if wait > 0 {
		q.Set("wait", "true")
		q.Set("timeout", fmt.Sprint(wait.Milliseconds()))
	}
	p := a.pop(path, q)
	if p == nil {
		return nil
	}
	if len(p.Messages) != 1 {
		a.t.Fatalf("pop batch=1 returned %d messages", len(p.Messages))
	}
	m := p.Messages[0]
	if m.LeaseID == "" || m.LeaseID != p.LeaseID {
		a.t.Fatalf("pop: message leaseId %q, top-level leaseId %q; want the same non-empty lease", m.LeaseID, p.LeaseID)
	}
	return &m
}

// TestSeedChargeEachOrderOnce is the scenario of the seed "Charge each
// order once", written against the wire: five orders, ORD-3 fails once
// before its commit (a failed ack: it comes back after retryDelay and
// leaves no marker), a charger group whose every charge commits its marker
// with the ack in one transaction, then a replay group that reads all five
// again and must charge none.
func TestSeedChargeEachOrderOnce(t *testing.T) {
	n := startNode(t, nodeOpts{})
	c := n.api(t)

	const (
		queue      = "seed-exactly-once"
		ns         = "seed-exactly-once"
		charger    = "seed-charger"
		replay     = "seed-replay"
		crashing   = "ORD-3"
		retryDelay = 500 * time.Millisecond
		phase      = 30 * time.Second
	)
	orders := []string{"ORD-1", "ORD-2", "ORD-3", "ORD-4", "ORD-5"}
	markerKey := func(order string) string { return "charge:" + order }

	// A 30 s lease (the charger holds each order well inside it), a retry
	// budget, and a retryDelay short enough for a test.
	r := c.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{
		"queue": queue, "options": map[string]any{"leaseTime": 30, "retryLimit": 5, "retryDelay": retryDelay.Milliseconds()},
	})
	var cfg struct {
		Configured bool `json:"configured"`
	}
	r.decode(t, &cfg)
	if !cfg.Configured {
		t.Fatalf("configure: %s", r)
	}
	for i, o := range orders {
		c.pushOne(pushItem{Queue: queue, TransactionID: "order-" + o, Payload: map[string]any{"orderId": o, "cents": 1000 + i}}, "queued")
	}

	type ledgerRow struct{ order, chargeID string }
	var ledger []ledgerRow
	type decision struct {
		group, order string
		ran          bool
	}
	var decisions []decision
	attempts := map[string]int{}
	var deliveries []string // the charger's deliveries, in order
	var failedAt time.Time  // when ORD-3's failed ack was sent
	var backAfter time.Duration
	var backRetryCount int

	// handle is the seed's four steps for one delivery. It reports whether
	// this delivery charged the card; decided is false for the failure
	// before the commit (the order comes back).
	handle := func(group string, m *popMessage) (ran, decided bool) {
		t.Helper()
		var order struct {
			OrderID string `json:"orderId"`
			Cents   int    `json:"cents"`
		}
		if err := json.Unmarshal(m.Data, &order); err != nil {
			t.Fatalf("payload %s: %v", m.Data, err)
		}
		attempts[order.OrderID]++
		if group == charger {
			deliveries = append(deliveries, order.OrderID)
			if order.OrderID == crashing && attempts[order.OrderID] == 2 {
				backAfter, backRetryCount = time.Since(failedAt), m.RetryCount
			}
		}
		grp := group

		// 1. Was this order charged already?
		if c.kvGet(ns, markerKey(order.OrderID)).Found {
			res := c.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &grp, LeaseID: m.LeaseID, Status: "completed"})
			if !res.Success {
				t.Fatalf("%s: ack of an already charged order refused: %s", order.OrderID, deref(res.Error))
			}
			return false, true
		}

		// 2. What can fail without touching the card fails here, once for
		//    ORD-3: a failed ack under the lease spends one retry.
		if order.OrderID == crashing && attempts[order.OrderID] == 1 {
			failedAt = time.Now()
			res := c.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &grp, LeaseID: m.LeaseID,
				Status: "failed", Error: strp("card network timed out")})
			if !res.Success || res.DLQ {
				t.Fatalf("%s: failed ack answered success=%v dlq=%v error=%s; want a retry", order.OrderID, res.Success, res.DLQ, deref(res.Error))
			}
			if e := c.kvGet(ns, markerKey(order.OrderID)); e.Found {
				t.Fatalf("%s failed before its commit and left a marker behind: %s", order.OrderID, e.Value)
			}
			t.Logf("  ok: %s failed before its commit and left no marker behind", order.OrderID)
			return false, false
		}

		// 3. The external effect.
		chargeID := fmt.Sprintf("ch_%s_%d", order.OrderID, len(ledger))
		ledger = append(ledger, ledgerRow{order.OrderID, chargeID})

		// 4. The marker and the ack, in ONE transaction.
		v := c.commit(markerCommit(*m, group, ns, markerKey(order.OrderID), chargeValue{ChargeID: chargeID, Cents: order.Cents}))
		switch {
		case v.Success:
			return true, true
		case v.Reason == "kv_precondition":
			res := c.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &grp, LeaseID: m.LeaseID, Status: "completed"})
			if !res.Success {
				t.Fatalf("%s: ack after a lost gate refused: %s", order.OrderID, deref(res.Error))
			}
			return false, true
		}
		t.Fatalf("%s: commit refused: reason %q error %q", order.OrderID, v.Reason, v.Error)
		return false, false
	}

	// drain pops and handles until the group has made wanted decisions or
	// the phase deadline passes: a total with a deadline, never a wait for
	// silence.
	drain := func(group string, wanted int) int {
		t.Helper()
		made := 0
		deadline := time.Now().Add(phase)
		for made < wanted && time.Now().Before(deadline) {
			m := c.popOne(queue, "", group, time.Second)
			if m == nil {
				continue
			}
			var o struct {
				OrderID string `json:"orderId"`
			}
			_ = json.Unmarshal(m.Data, &o)
			ran, decided := handle(group, m)
			if decided {
				made++
				decisions = append(decisions, decision{group, o.OrderID, ran})
				t.Logf("  %s %s: ran=%v", group, o.OrderID, ran)
			}
		}
		return made
	}

	t.Log("charging")
	if got := drain(charger, len(orders)); got != len(orders) {
		t.Fatalf("the charger decided %d orders in %v, want %d", got, phase, len(orders))
	}
	t.Log("replaying")
	if got := drain(replay, len(orders)); got != len(orders) {
		t.Fatalf("the replay decided %d orders in %v, want %d", got, phase, len(orders))
	}

	// Checks.
	perOrder := map[string]int{}
	byOrder := map[string]string{}
	for _, l := range ledger {
		perOrder[l.order]++
		byOrder[l.order] = l.chargeID
	}
	if len(ledger) != len(orders) {
		t.Errorf("the ledger has %d charges, want %d: %v", len(ledger), len(orders), ledger)
	}
	for _, o := range orders {
		if perOrder[o] != 1 {
			t.Errorf("%s was charged %d times, want once", o, perOrder[o])
		}
	}
	want := []string{"ORD-1", "ORD-2", "ORD-3", "ORD-3", "ORD-4", "ORD-5"}
	if strings.Join(deliveries, ",") != strings.Join(want, ",") {
		t.Errorf("the charger's deliveries were %v, want %v (ORD-3 again, before ORD-4 in the same partition)", deliveries, want)
	}
	if attempts[crashing] < 3 { // two charger deliveries and one replay
		t.Errorf("%s: %d deliveries, want it back after its failure (and once in the replay)", crashing, attempts[crashing])
	}
	if backAfter < retryDelay {
		t.Errorf("%s came back %v after its failed ack; want no sooner than retryDelay %v", crashing, backAfter, retryDelay)
	}
	if backAfter > retryDelay*5/4+5*time.Second {
		t.Errorf("%s came back %v after its failed ack; retryDelay is %v", crashing, backAfter, retryDelay)
	}
	if backRetryCount != 1 {
		t.Errorf("%s came back with retryCount %d, want 1", crashing, backRetryCount)
	}
	replayed := map[string]bool{}
	for _, d := range decisions {
		if d.group != replay {
			continue
		}
		replayed[d.order] = true
		if d.ran {
			t.Errorf("the replay charged %s again", d.order)
		}
	}
	if len(replayed) != len(orders) {
		t.Errorf("the replay received %d distinct orders, want %d", len(replayed), len(orders))
	}

	keys := make([]string, len(orders))
	for i, o := range orders {
		keys[i] = markerKey(o)
	}
	rows, missing := c.kvGetMany(ns, keys)
	if len(rows) != len(orders) || len(missing) != 0 {
		t.Errorf("getMany: %d markers, missing %v; want %d and none missing", len(rows), missing, len(orders))
	}
	for _, row := range rows {
		order := strings.TrimPrefix(row.Key, "charge:")
		if v := decodeCharge(t, row.Value); v.ChargeID != byOrder[order] || v.ChargeID == "" {
			t.Errorf("marker %s names charge %q, the ledger charged %s with %q", row.Key, v.ChargeID, order, byOrder[order])
		}
	}

	// Both groups are done: nothing left to deliver, nothing held.
	for _, g := range []string{charger, replay} {
		if m := c.popOne(queue, "", g, 0); m != nil {
			t.Errorf("group %s still gets %s after every order was decided", g, m.TransactionID)
		}
	}

	names := make([]string, 0, len(ledger))
	for _, l := range ledger {
		names = append(names, l.order+"="+l.chargeID)
	}
	sort.Strings(names)
	t.Logf("ledger: %s (ORD-3 back after %v, retryCount %d)", strings.Join(names, ", "), backAfter.Round(time.Millisecond), backRetryCount)
}
