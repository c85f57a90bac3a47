package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// ledger is the seed's pattern with the effect inside the transaction:
// workers pop an order, read its marker, and commit the marker
// (putIfAbsent, required), the ack and a push of the charge to a ledger
// queue in ONE transaction. Workers crash (abandon the lease, or drop the
// answer to a commit they sent) and leases expire. The ledger must hold
// each order exactly once, and every order must have its marker.
type ledgerWL struct {
	orders, ledger, ns string
	n                  int
	mu                 sync.Mutex
	pushed             map[string]bool
}

func newLedger() *ledgerWL { return &ledgerWL{n: 300, pushed: map[string]bool{}} }

func (l *ledgerWL) Name() string { return "ledger" }

func (l *ledgerWL) Setup(ctx context.Context, env *Env) error {
	l.orders = fmt.Sprintf("jepsen-orders-%d", env.Seed)
	l.ledger = fmt.Sprintf("jepsen-ledger-%d", env.Seed)
	l.ns = fmt.Sprintf("jepsen-ledger-%d", env.Seed)
	c := env.Client()
	return retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "POST", "/api/v1/configure", map[string]any{"queue": l.orders,
			"options": map[string]any{"leaseTime": 2, "retryLimit": 1000, "retryDelay": 50}}, nil)
		return st == history.OK && r.Status == 200, err
	})
}

func (l *ledgerWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.produce(ctx, env) }()
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); l.work(ctx, env, i, false) }(i)
	}
	wg.Wait()
}

// produce pushes the orders (deterministic transactionIds, retried until
// definite), spread over the run.
func (l *ledgerWL) produce(ctx context.Context, env *Env) {
	c := env.Client()
	for i := 0; i < l.n && ctx.Err() == nil; i++ {
		id := fmt.Sprintf("order-%d", i)
		item := map[string]any{"queue": l.orders, "partition": fmt.Sprint("c", i%6), "transactionId": id, "payload": map[string]string{"order": id}}
		retryDefinite(ctx, func() (bool, error) {
			op := env.Rec.Begin(c.ID, "ledger-order", id)
			r, st, err := c.Do(ctx, "POST", "/api/v1/push", map[string]any{"items": []any{item}}, nil)
			if st == history.OK && r.Status == 201 {
				op.End(history.OK, json.RawMessage(r.Body), nil)
				l.mu.Lock()
				l.pushed[id] = true
				l.mu.Unlock()
				return true, nil
			}
			op.End(st, nil, err)
			return false, err
		})
		time.Sleep(10 * time.Millisecond)
	}
}

// work handles orders. Outside drain mode it crashes now and then: before
// the commit (abandoning the lease) or right after sending it (never
// reading the answer).
func (l *ledgerWL) work(ctx context.Context, env *Env, i int, drain bool) int {
	c := env.Client()
	rng := env.Rand(300 + i)
	handled := 0
	for ctx.Err() == nil {
		r, st, _ := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=charger&subscriptionMode=all&batch=1&wait=true&timeout=1000", l.orders), nil, nil)
		if st != history.OK || r.Status != 200 {
			if drain && st == history.OK {
				return handled
			}
			continue
		}
		var pop qPopOut
		json.Unmarshal(r.Body, &pop)
		if len(pop.Messages) == 0 {
			continue
		}
		m := pop.Messages[0]
		handled++
		if !drain && rng.Intn(10) == 0 {
			continue // crash before anything: the lease runs out
		}
		marker := "charge:" + m.TransactionID
		found, ok := l.markerExists(ctx, c, marker)
		if !ok {
			continue
		}
		ack := map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"consumerGroup": "charger", "leaseId": m.LeaseID}
		if found {
			c.Do(ctx, "POST", "/api/v1/transaction", map[string]any{"operations": []any{ack}}, nil)
			continue
		}
		charge := fmt.Sprintf("ch-%s-%d-%d", m.TransactionID, i, rng.Int63())
		body := map[string]any{
			"operations": []any{ack, map[string]any{"type": "push", "items": []any{map[string]any{
				"queue": l.ledger, "transactionId": charge, "payload": map[string]string{"order": m.TransactionID, "charge": charge}}}}},
			"kv": []any{map[string]any{"op": "putIfAbsent", "ns": l.ns, "key": marker, "value": charge, "ttlSeconds": 3600, "required": true}},
		}
		op := env.Rec.Begin(c.ID, "ledger-commit", map[string]string{"order": m.TransactionID, "charge": charge})
		if !drain && rng.Intn(10) == 0 {
			// Send the commit and crash before reading the answer.
			short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			c.Do(short, "POST", "/api/v1/transaction", body, nil)
			cancel()
			op.End(history.Unknown, nil, fmt.Errorf("worker crashed after sending"))
			continue
		}
		r, st, err := c.Do(ctx, "POST", "/api/v1/transaction", body, nil)
		if st != history.OK {
			op.End(st, nil, err)
			continue
		}
		var out struct {
			Success bool   `json:"success"`
			Reason  string `json:"reason"`
		}
		json.Unmarshal(r.Body, &out)
		op.End(history.OK, out, nil)
	}
	return handled
}

func (l *ledgerWL) markerExists(ctx context.Context, c *client.Client, key string) (found, ok bool) {
	r, st, _ := c.Do(ctx, "POST", "/api/v1/kv", map[string]any{"operations": []any{map[string]any{"op": "get", "ns": l.ns, "key": key}}}, nil)
	if st != history.OK || r.Status != 200 {
		return false, false
	}
	var out struct {
		Results []struct {
			Found bool `json:"found"`
		} `json:"results"`
	}
	json.Unmarshal(r.Body, &out)
	return len(out.Results) == 1 && out.Results[0].Found, len(out.Results) == 1
}

func (l *ledgerWL) Finish(ctx context.Context, env *Env) error {
	quiet := 0
	for ctx.Err() == nil && quiet < 3 {
		if l.work(ctx, env, 99, true) == 0 {
			quiet++
			time.Sleep(time.Second)
		} else {
			quiet = 0
		}
	}
	return ctx.Err()
}

func (l *ledgerWL) Check(env *Env) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := env.Client()
	charges := map[string][]string{}
	group := fmt.Sprintf("audit-%d", time.Now().UnixNano())
	for i := 0; i < 1000 && ctx.Err() == nil; i++ {
		r, st, _ := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&subscriptionMode=all&batch=1000", l.ledger, group), nil, nil)
		if st != history.OK {
			continue
		}
		if r.Status == 204 {
			break
		}
		var pop struct {
			Messages []struct {
				qMsg
				Data struct {
					Order  string `json:"order"`
					Charge string `json:"charge"`
				} `json:"data"`
			} `json:"messages"`
		}
		json.Unmarshal(r.Body, &pop)
		var acks []any
		for _, m := range pop.Messages {
			charges[m.Data.Order] = append(charges[m.Data.Order], m.Data.Charge)
			acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID})
		}
		c.Do(ctx, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, nil)
	}
	// An order push whose outcome stayed unknown (the run ended while the
	// producer was still retrying it) may have stored the order.
	maybe := map[string]bool{}
	ops := 0
	for _, op := range env.Rec.Ops() {
		if strings.HasPrefix(op.Kind, "ledger-") {
			ops++
		}
		var id string
		if op.Kind == "ledger-order" && op.Status == history.Unknown && json.Unmarshal(op.Input, &id) == nil {
			maybe[id] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return checkLedger(l.pushed, maybe, charges, ops)
}

// checkLedger compares the orders pushed (with a 201) against the charges
// found in the ledger queue (order → its charges). maybe holds the orders
// whose push had an unknown outcome and never got a 201: they may be
// charged (once) or not. ops is the op count to report.
func checkLedger(pushed, maybe map[string]bool, charges map[string][]string, ops int) Result {
	var res Result
	res.Ops = ops
	for order := range pushed {
		switch n := len(charges[order]); {
		case n == 0:
			res.Lost++
			res.violate("order %s was never charged", order)
		case n > 1:
			res.Duplicated++
			res.violate("order %s was charged %d times: %v", order, n, charges[order])
		}
	}
	for order, cs := range charges {
		switch {
		case pushed[order]:
		case !maybe[order]:
			res.violate("a charge for %s, which was never pushed", order)
		case len(cs) > 1:
			res.Duplicated++
			res.violate("order %s (its push had an unknown outcome) was charged %d times: %v", order, len(cs), cs)
		}
	}
	return res
}
