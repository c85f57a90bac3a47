package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// eoRun is the seed's charge-once consumer (pop → marker get → one
// transaction of ack + ledger push + required putIfAbsent of the marker),
// run by several workers spread over a cluster whose leader dies mid-run.
type eoRun struct {
	c                      *testCluster
	queue, ledgerQ, ns, gr string
	leaseTime              int

	stop  atomic.Bool
	abort atomic.Bool
	wg    sync.WaitGroup

	mu      sync.Mutex
	decided map[string]string   // order → how it was decided (commit | marker | gate)
	commits map[string][]string // order → ledger transactionIds of transactions answered success
	stats   map[string]int
	faults  []string
}

func (r *eoRun) count(k string) {
	r.mu.Lock()
	r.stats[k]++
	r.mu.Unlock()
}

func (r *eoRun) fault(format string, args ...any) {
	r.mu.Lock()
	if len(r.faults) < 50 {
		r.faults = append(r.faults, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

func (r *eoRun) decide(order, how string) {
	r.mu.Lock()
	if _, done := r.decided[order]; !done {
		r.decided[order] = how
	}
	r.mu.Unlock()
}

func (r *eoRun) decidedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.decided)
}

func (r *eoRun) markerKey(order string) string { return "charge:" + order }

// eoWorker is one consumer: its home node, and how many times it moved on
// from a node that failed it.
type eoWorker struct {
	r    *eoRun
	id   int
	k    int
	seq  int
	home int
}

func (w *eoWorker) node() *node {
	ns := w.r.c.nodes
	for i := 0; i < len(ns); i++ {
		if n := ns[(w.home+w.k+i)%len(ns)]; n.Running() {
			return n
		}
	}
	return ns[w.home]
}

// failed moves the worker to the next node and backs off a little.
func (w *eoWorker) failed(kind string) {
	w.r.count(kind)
	w.k++
	time.Sleep(30 * time.Millisecond)
}

func (w *eoWorker) run() {
	defer w.r.wg.Done()
	deadline := time.Now().Add(60 * time.Second)
	q := url.Values{"consumerGroup": {w.r.gr}, "subscriptionMode": {"all"}, "batch": {"1"}, "wait": {"true"}, "timeout": {"1000"}}
	path := "/api/v1/pop/queue/" + w.r.queue + "?" + q.Encode()
	for i := 0; i < 20000 && !w.r.stop.Load() && time.Now().Before(deadline); i++ {
		n := w.node()
		resp, err := n.send(10*time.Second, "GET", path, nil, nil)
		switch {
		case err != nil:
			w.failed("pop: transport error")
			continue
		case resp.Status == http.StatusNoContent:
			continue
		case resp.Status >= 500:
			w.failed("pop: " + fmt.Sprint(resp.Status, " ", errCode(resp)))
			continue
		case resp.Status != http.StatusOK:
			w.r.fault("pop through %s: %s", n.ID(), resp)
			w.failed("pop: other")
			continue
		}
		var p popResponse
		if err := json.Unmarshal(resp.Body, &p); err != nil || len(p.Messages) != 1 {
			w.r.fault("pop through %s: %v: %s", n.ID(), err, resp)
			continue
		}
		w.r.count("deliveries")
		w.handle(p.Messages[0])
	}
}

// markerState reads the order's marker (linearizable). ok=false: no
// definite answer after a few tries.
func (w *eoWorker) markerState(order string) (found, ok bool) {
	body := map[string]any{"operations": []any{map[string]any{"op": "get", "ns": w.r.ns, "key": w.r.markerKey(order)}}}
	for try := 0; try < 40 && !w.r.abort.Load(); try++ {
		n := w.node()
		resp, err := n.send(10*time.Second, "POST", "/api/v1/kv", body, nil)
		switch {
		case err != nil:
			w.failed("kv get: transport error")
			continue
		case resp.Status == http.StatusTooManyRequests:
			w.r.count("kv get: 429")
			time.Sleep(100 * time.Millisecond)
			continue
		case resp.Status >= 500:
			w.failed("kv get: " + fmt.Sprint(resp.Status, " ", errCode(resp)))
			continue
		case resp.Status != http.StatusOK:
			w.r.fault("kv get through %s: %s", n.ID(), resp)
			return false, false
		}
		var out struct {
			Results []kvEntry `json:"results"`
		}
		if err := json.Unmarshal(resp.Body, &out); err != nil || len(out.Results) != 1 {
			w.r.fault("kv get through %s: %v: %s", n.ID(), err, resp)
			return false, false
		}
		return out.Results[0].Found, true
	}
	return false, false
}

// ack acks m under its lease, best effort: a refused ack (the lease ran
// out) lets the message come back, and its next delivery finds the marker.
func (w *eoWorker) ack(m popMessage) {
	gr := w.r.gr
	req := ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &gr, LeaseID: m.LeaseID, Status: "completed"}
	for try := 0; try < 20 && !w.r.abort.Load(); try++ {
		n := w.node()
		resp, err := n.send(10*time.Second, "POST", "/api/v1/ack", req, nil)
		switch {
		case err != nil:
			w.failed("ack: transport error")
			continue
		case resp.Status >= 500:
			w.failed("ack: " + fmt.Sprint(resp.Status, " ", errCode(resp)))
			continue
		case resp.Status != http.StatusOK:
			w.r.fault("ack through %s: %s", n.ID(), resp)
			return
		}
		var out []ackResult
		if err := json.Unmarshal(resp.Body, &out); err != nil || len(out) != 1 {
			w.r.fault("ack through %s: %v: %s", n.ID(), err, resp)
			return
		}
		if out[0].Success {
			w.r.count("ack: ok")
		} else {
			w.r.count("ack: refused")
		}
		return
	}
}

// handle is the seed's steps for one delivery. A transaction whose outcome
// is unknown is never simply sent again: the worker goes back to the
// marker gate, and only an absent marker leads to a new attempt (a new
// charge, whose transaction the gate still protects).
func (w *eoWorker) handle(m popMessage) {
	var o struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(m.Data, &o); err != nil || o.OrderID == "" {
		w.r.fault("order payload %s: %v", m.Data, err)
		return
	}
	gr := w.r.gr
	for gate := 0; gate < 20 && !w.r.abort.Load(); gate++ {
		found, ok := w.markerState(o.OrderID)
		if !ok {
			w.r.count("gate: undecided, delivery dropped")
			return
		}
		if found {
			w.r.count("gate: marker found")
			w.r.decide(o.OrderID, "marker")
			w.ack(m)
			return
		}
		// The charge: its record goes to the ledger queue in the same
		// transaction as the marker and the ack. Each attempt has its own
		// ledger transactionId, so only the marker can keep it single.
		w.seq++
		ledgerTxn := fmt.Sprintf("%s/w%d/%d", o.OrderID, w.id, w.seq)
		time.Sleep(10 * time.Millisecond) // the card network
		body := map[string]any{
			"operations": []any{
				map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
					"consumerGroup": gr, "leaseId": m.LeaseID, "status": "completed"},
				map[string]any{"type": "push", "items": []any{map[string]any{
					"queue": w.r.ledgerQ, "partition": "Default", "transactionId": ledgerTxn,
					"payload": map[string]any{"orderId": o.OrderID, "ledgerTxn": ledgerTxn}}}},
			},
			"kv": []any{map[string]any{"op": "putIfAbsent", "ns": w.r.ns, "key": w.r.markerKey(o.OrderID),
				"value": map[string]any{"ledgerTxn": ledgerTxn}, "ttlSeconds": 3600, "required": true}},
		}
		n := w.node()
		resp, err := n.send(10*time.Second, "POST", "/api/v1/transaction", body, nil)
		switch {
		case err != nil:
			w.failed("txn: transport error (outcome unknown)")
			continue // back to the gate
		case resp.Status >= 500:
			w.failed("txn: " + fmt.Sprint(resp.Status, " ", errCode(resp)))
			continue // back to the gate
		case resp.Status != http.StatusOK:
			w.r.fault("transaction through %s: %s", n.ID(), resp)
			return
		}
		var v txnVerdict
		if err := json.Unmarshal(resp.Body, &v); err != nil {
			w.r.fault("transaction through %s: %v: %s", n.ID(), err, resp)
			return
		}
		switch {
		case v.Success:
			w.r.count("txn: committed")
			w.r.mu.Lock()
			w.r.commits[o.OrderID] = append(w.r.commits[o.OrderID], ledgerTxn)
			w.r.mu.Unlock()
			w.r.decide(o.OrderID, "commit")
		case v.Reason == "kv_precondition":
			w.r.count("txn: kv_precondition")
			w.r.decide(o.OrderID, "gate")
			w.ack(m)
		case v.Reason == "rejected_ack":
			w.r.count("txn: rejected_ack, delivery dropped")
		default:
			w.r.fault("transaction for %s through %s: unexpected verdict %s", o.OrderID, n.ID(), resp)
		}
		return
	}
}

func (r *eoRun) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var kinds []string
	for k, v := range r.stats {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ", ")
}

// TestClusterExactlyOnceAcrossFailover runs the seed's exactly-once
// consumer (six workers over the three nodes, 200 orders) and kills the
// leader with SIGKILL when about a third of the orders are done, then
// restarts it while the workers go on. Deliveries repeat (leases run out,
// replies are lost), transactions end with unknown outcomes, but the ledger
// queue, written only inside the marker transaction, must end with each
// order exactly once, and every order must have its marker naming that
// ledger entry.
func TestClusterExactlyOnceAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	c := startCluster(t, nodeOpts{})
	old := c.leader(10 * time.Second)
	const orders = 200
	r := &eoRun{c: c, queue: "eo-orders", ledgerQ: "eo-ledger", ns: "eo-charges", gr: "eo-charger", leaseTime: 3,
		decided: map[string]string{}, commits: map[string][]string{}, stats: map[string]int{}}
	f0 := c.others(old)[0]
	a := f0.api(t)
	a.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{
		"queue": r.queue, "options": map[string]any{"leaseTime": r.leaseTime, "retryLimit": 100},
	})
	orderID := func(i int) string { return fmt.Sprintf("ORD-%03d", i) }
	for b := 0; b < orders; b += 50 {
		var items []pushItem
		for i := b; i < b+50 && i < orders; i++ {
			items = append(items, pushItem{Queue: r.queue, Partition: fmt.Sprintf("p%d", i%8),
				TransactionID: "order-" + orderID(i), Payload: map[string]any{"orderId": orderID(i)}})
		}
		for _, res := range a.push(items...) {
			if res.Status != "queued" {
				t.Fatalf("push of the orders: %+v", res)
			}
		}
	}

	start := time.Now()
	const workers = 6
	for w := 0; w < workers; w++ {
		r.wg.Add(1)
		go (&eoWorker{r: r, id: w, home: w % clusterSize}).run()
	}
	stopped := false
	defer func() {
		if !stopped {
			r.abort.Store(true)
			r.stop.Store(true)
			r.wg.Wait()
		}
	}()

	if ok, _ := pollUntil(30*time.Second, 10*time.Millisecond, func() (bool, string) { return r.decidedCount() >= orders/3, "" }); !ok {
		t.Fatalf("only %d of %d orders decided after 30 s before the kill: %s", r.decidedCount(), orders, r.summary())
	}
	before := r.decidedCount()
	killAt := time.Now()
	old.kill9()
	newID, election, err := c.awaitNewLeader(old.ID(), killAt, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 of leader %s with %d of %d orders decided (after %v); new leader %s visible after %v",
		old.ID(), before, orders, killAt.Sub(start).Round(time.Millisecond), newID, election.Round(time.Millisecond))
	old.restart()
	rejoin := c.waitRejoined(old, 30*time.Second)
	t.Logf("node %s restarted and rejoined in %v; %d orders decided so far", old.ID(), rejoin.Round(time.Millisecond), r.decidedCount())

	if ok, _ := pollUntil(45*time.Second, 20*time.Millisecond, func() (bool, string) { return r.decidedCount() >= orders, "" }); !ok {
		r.mu.Lock()
		var missing []string
		for i := 0; i < orders; i++ {
			if _, ok := r.decided[orderID(i)]; !ok {
				missing = append(missing, orderID(i))
			}
		}
		r.mu.Unlock()
		t.Errorf("after 45 s only %d of %d orders were decided; undecided: %v", r.decidedCount(), orders, missing)
	}
	r.stop.Store(true)
	r.wg.Wait()
	stopped = true
	t.Logf("%d orders decided in %v; %s", r.decidedCount(), time.Since(start).Round(time.Millisecond), r.summary())
	r.mu.Lock()
	for _, f := range r.faults {
		t.Errorf("worker saw: %s", f)
	}
	for o, txns := range r.commits {
		if len(txns) > 1 {
			t.Errorf("DOUBLE CHARGE: %s: %d transactions answered success: %v", o, len(txns), txns)
		}
	}
	r.mu.Unlock()

	// The ledger, read through a follower by a fresh group.
	l := c.leader(10 * time.Second)
	f := c.others(l)[0]
	fa := f.api(t)
	got := drain(t, fa, r.ledgerQ, "eo-audit")
	perOrder := map[string][]string{}
	for _, m := range got {
		var p struct {
			OrderID   string `json:"orderId"`
			LedgerTxn string `json:"ledgerTxn"`
		}
		if err := json.Unmarshal(m.Data, &p); err != nil || p.LedgerTxn != m.TransactionID {
			t.Errorf("ledger entry %s: payload %s (%v)", m.TransactionID, m.Data, err)
			continue
		}
		perOrder[p.OrderID] = append(perOrder[p.OrderID], p.LedgerTxn)
	}
	var twice, never []string
	for i := 0; i < orders; i++ {
		switch n := len(perOrder[orderID(i)]); {
		case n == 0:
			never = append(never, orderID(i))
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s×%d %v", orderID(i), n, perOrder[orderID(i)]))
		}
		delete(perOrder, orderID(i))
	}
	if len(twice) > 0 {
		t.Errorf("CHARGED TWICE: %d orders have more than one ledger entry: %v", len(twice), twice)
	}
	if len(never) > 0 {
		t.Errorf("NEVER CHARGED: %d orders have no ledger entry: %v", len(never), never)
	}
	if len(perOrder) > 0 {
		t.Errorf("ledger entries for unknown orders: %v", perOrder)
	}

	// Every order has its marker, naming its one ledger entry.
	ledgerOf := map[string]string{}
	for _, m := range got {
		ledgerOf[strings.SplitN(m.TransactionID, "/", 2)[0]] = m.TransactionID
	}
	markers := 0
	for b := 0; b < orders; b += 50 {
		var keys []string
		for i := b; i < b+50 && i < orders; i++ {
			keys = append(keys, r.markerKey(orderID(i)))
		}
		rows, missing := fa.kvGetMany(r.ns, keys)
		if len(missing) > 0 {
			t.Errorf("orders without a marker: %v", missing)
		}
		for _, row := range rows {
			markers++
			var v struct {
				LedgerTxn string `json:"ledgerTxn"`
			}
			_ = json.Unmarshal(row.Value, &v)
			if order := strings.TrimPrefix(row.Key, "charge:"); v.LedgerTxn == "" || ledgerOf[order] != v.LedgerTxn {
				t.Errorf("marker of %s is %s; the ledger's entry for it is %q", order, row.Value, ledgerOf[order])
			}
		}
	}
	t.Logf("ledger: %d entries for %d orders; %d markers", len(got), orders, markers)
	for _, n := range c.nodes {
		n.requireRunning()
	}
}
