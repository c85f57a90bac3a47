package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// queue: producers push unique ids to several partitions; consumers in two
// groups pop, usually ack, sometimes fail and sometimes abandon the lease.
// After the faults heal the groups drain the queue. The checker then asks:
// was every push that got 201 delivered to every group; was anything
// delivered to a group after that group acked it; did first deliveries keep
// each partition's order; did any message fail more than retryLimit + 1
// times; did any id become two messages.
type queueWL struct {
	name       string
	partitions int
	groups     []string
	retryLimit int
	mu         sync.Mutex
	seq        int
}

func newQueue() *queueWL {
	return &queueWL{partitions: 4, groups: []string{"g1", "g2"}, retryLimit: 3}
}

func (q *queueWL) Name() string { return "queue" }

type qPushIn struct {
	IDs       []string `json:"ids"`
	Partition string   `json:"partition"`
}

type qPushItem struct {
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
	Offset    uint64 `json:"offset"`
	Partition string `json:"partitionId"`
	Txn       string `json:"transactionId"`
}

type qMsg struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	Data          json.RawMessage `json:"data"`
}

// intact reports whether m's data is the payload its producer pushed
// ({"id": <its transactionId>}): no read may return other bytes than the
// ones written, whatever a disk did to a node's files.
func (m qMsg) intact() bool {
	var d map[string]string
	return json.Unmarshal(m.Data, &d) == nil && len(d) == 1 && d["id"] == m.TransactionID
}

type qPopOut struct {
	Messages []qMsg `json:"messages"`
}

type qAckIn struct {
	Group  string   `json:"group"`
	IDs    []string `json:"ids"`
	Status string   `json:"status"`
}

type qAckOut struct {
	Success bool   `json:"success"`
	DLQ     bool   `json:"dlq"`
	Noop    bool   `json:"noop"`
	Error   string `json:"error"`
}

func (q *queueWL) Setup(ctx context.Context, env *Env) error {
	q.name = fmt.Sprintf("jepsen-queue-%d", env.Seed)
	c := env.Client()
	opts := map[string]any{"leaseTime": 3, "retryLimit": q.retryLimit, "retryDelay": 100}
	if env.Retention > 0 {
		opts["retentionEnabled"], opts["completedRetentionSeconds"] = true, max(1, int(env.Retention/time.Second))
	}
	body := map[string]any{"queue": q.name, "options": opts}
	return retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "POST", "/api/v1/configure", body, nil)
		return st == history.OK && r.Status == 200, err
	})
}

// retryDefinite repeats fn until it reports done or ctx ends.
func retryDefinite(ctx context.Context, fn func() (bool, error)) error {
	var last error
	for {
		ok, err := fn()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up: %v", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (q *queueWL) nextIDs(prod, n int) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for i := 0; i < n; i++ {
		q.seq++
		ids = append(ids, fmt.Sprintf("p%d-%d", prod, q.seq))
	}
	return ids
}

func (q *queueWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for p := 0; p < 3; p++ {
		wg.Add(1)
		go func(p int) { defer wg.Done(); q.produce(ctx, env, p) }(p)
	}
	for _, g := range q.groups {
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func(g string, i int) { defer wg.Done(); q.consume(ctx, env, g, i, false) }(g, i)
		}
	}
	wg.Wait()
}

// produce pushes batches of fresh ids; an unknown outcome is retried with
// the same transactionIds until it is definite (dedup makes that safe).
func (q *queueWL) produce(ctx context.Context, env *Env, p int) {
	c := env.Client()
	rng := env.Rand(100 + p)
	for ctx.Err() == nil {
		time.Sleep(time.Duration(5+rng.Intn(20)) * time.Millisecond)
		in := qPushIn{IDs: q.nextIDs(p, 1+rng.Intn(4)), Partition: fmt.Sprint("part-", rng.Intn(q.partitions))}
		var items []map[string]any
		for _, id := range in.IDs {
			items = append(items, map[string]any{"queue": q.name, "partition": in.Partition, "transactionId": id, "payload": map[string]string{"id": id}})
		}
		for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
			op := env.Rec.Begin(c.ID, "push", in)
			r, st, err := c.Do(ctx, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
			if st == history.OK && r.Status == 201 {
				var out []qPushItem
				json.Unmarshal(r.Body, &out)
				op.End(history.OK, out, nil)
				break
			}
			if st == history.OK { // a 4xx: definite refusal
				op.End(history.Fail, string(r.Body), err)
				break
			}
			op.End(st, nil, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// consume pops and handles messages. drain=true acks everything.
func (q *queueWL) consume(ctx context.Context, env *Env, group string, i int, drain bool) (delivered int) {
	c := env.Client()
	rng := env.Rand(200 + i + len(group)*31)
	for ctx.Err() == nil {
		batch := 1 + rng.Intn(4)
		if drain {
			batch = 100
		} else {
			time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
		}
		path := fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&subscriptionMode=all&batch=%d&wait=true&timeout=1000", q.name, group, batch)
		op := env.Rec.Begin(c.ID, "pop", map[string]string{"group": group})
		r, st, err := c.Do(ctx, "GET", path, nil, nil)
		if st != history.OK {
			op.End(st, nil, err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var out qPopOut
		if r.Status == 200 {
			json.Unmarshal(r.Body, &out)
		}
		op.End(history.OK, out, nil)
		if drain {
			if len(out.Messages) == 0 {
				return delivered
			}
			delivered += len(out.Messages)
			q.ackAll(ctx, env, c, group, out.Messages)
			continue
		}
		delivered += len(out.Messages)
		for _, m := range out.Messages {
			status := "completed"
			if !drain {
				switch x := rng.Intn(10); {
				case x == 0:
					status = "failed"
				case x == 1:
					status = "" // abandon the rest of this batch: the lease runs out
				}
			}
			if status == "" {
				break
			}
			if !q.ack(ctx, env, c, group, m, status) || status == "failed" {
				break // a failed ack gives the partition back
			}
		}
	}
	return delivered
}

func (q *queueWL) ack(ctx context.Context, env *Env, c *client.Client, group string, m qMsg, status string) bool {
	body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"leaseId": m.LeaseID, "consumerGroup": group, "status": status, "error": "jepsen says no"}
	op := env.Rec.Begin(c.ID, "ack", qAckIn{Group: group, IDs: []string{m.TransactionID}, Status: status})
	r, st, err := c.Do(ctx, "POST", "/api/v1/ack", body, nil)
	if st != history.OK || r.Status != 200 {
		op.End(st, nil, err)
		return false
	}
	var out []qAckOut
	json.Unmarshal(r.Body, &out)
	if len(out) != 1 {
		op.End(history.Fail, string(r.Body), fmt.Errorf("ack answered %d items", len(out)))
		return false
	}
	op.End(history.OK, out, nil)
	return out[0].Success
}

// ackAll acks a whole pop as completed with one /ack/batch.
func (q *queueWL) ackAll(ctx context.Context, env *Env, c *client.Client, group string, ms []qMsg) {
	var items []map[string]any
	in := qAckIn{Group: group, Status: "completed"}
	for _, m := range ms {
		items = append(items, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"leaseId": m.LeaseID, "status": "completed"})
		in.IDs = append(in.IDs, m.TransactionID)
	}
	op := env.Rec.Begin(c.ID, "ack", in)
	r, st, err := c.Do(ctx, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": items}, nil)
	if st != history.OK || r.Status != 200 {
		op.End(st, nil, err)
		return
	}
	var out []qAckOut
	json.Unmarshal(r.Body, &out)
	if len(out) != len(ms) {
		op.End(history.Fail, string(r.Body), fmt.Errorf("ack batch answered %d items for %d", len(out), len(ms)))
		return
	}
	op.End(history.OK, out, nil)
}

func (q *queueWL) Finish(ctx context.Context, env *Env) error {
	var wg sync.WaitGroup
	for _, g := range q.groups {
		wg.Add(1)
		go func(g string) {
			defer wg.Done()
			quiet := 0
			for ctx.Err() == nil && quiet < 3 {
				if q.consume(ctx, env, g, 99, true) == 0 {
					quiet++ // nothing for a whole long-poll: leases may still be expiring
					time.Sleep(time.Second)
				} else {
					quiet = 0
				}
			}
		}(g)
	}
	wg.Wait()
	return ctx.Err()
}

// dlq lists the ids in the DLQ of a group.
func (q *queueWL) dlq(ctx context.Context, env *Env, group string) map[string]bool {
	c := env.Client()
	out := map[string]bool{}
	retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/dlq?queue=%s&consumerGroup=%s&limit=10000", q.name, group), nil, nil)
		if st != history.OK || r.Status != 200 {
			return false, err
		}
		var body struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
			} `json:"messages"`
		}
		json.Unmarshal(r.Body, &body)
		for _, m := range body.Messages {
			out[m.TransactionID] = true
		}
		return true, nil
	})
	return out
}

type delivery struct {
	op     history.Op
	msg    qMsg
	offset uint64
	known  bool // offset is known (the push was acknowledged)
}

func (q *queueWL) Check(env *Env) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead := map[string]map[string]bool{}
	for _, g := range q.groups {
		dead[g] = q.dlq(ctx, env, g)
	}
	res := q.check(env.Rec.Ops(), dead)
	if env.Retention > 0 {
		if left := q.leftAfterRetention(ctx, env); left != 0 {
			res.violate("retention: %d messages still stored %v after every group consumed them", left, env.Retention+10*time.Second)
		}
	}
	return res
}

// leftAfterRetention waits until the queue's consumed messages are older
// than the retention and swept, and returns how many are still stored (-1
// when the queue could not be read).
func (q *queueWL) leftAfterRetention(ctx context.Context, env *Env) int {
	c := env.Client()
	left := -1
	deadline := time.Now().Add(env.Retention + 10*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r, st, _ := c.Do(ctx, "GET", "/api/v1/resources/queues/"+q.name, nil, nil)
		if st == history.OK && r.Status == 200 {
			var body struct {
				Totals struct {
					Total int `json:"total"`
				} `json:"totals"`
			}
			if json.Unmarshal(r.Body, &body) == nil {
				if left = body.Totals.Total; left == 0 {
					return 0
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return left
}

// check is the queue checker over a history and each group's DLQ (group →
// ids dead-lettered in it).
func (q *queueWL) check(ops []history.Op, dlq map[string]map[string]bool) Result {
	var res Result
	acked := map[string]qPushItem{} // id → its stored message
	msgIDs := map[string]map[string]bool{}
	for _, op := range ops {
		if op.Kind != "push" || op.Status != history.OK {
			continue
		}
		res.Ops++
		var out []qPushItem
		json.Unmarshal(op.Output, &out)
		for _, it := range out {
			if it.Status != "queued" && it.Status != "duplicate" {
				continue
			}
			if prev, ok := acked[it.Txn]; ok && prev.MessageID != it.MessageID {
				res.Duplicated++
				res.violate("push of %s answered two message ids: %s and %s", it.Txn, prev.MessageID, it.MessageID)
			}
			acked[it.Txn] = it
		}
	}
	for _, g := range q.groups {
		dead := dlq[g]
		seen := map[string][]delivery{}
		consumedAt := map[string]int64{} // id → return time of the first successful completed ack
		failures := map[string]int{}
		for _, op := range ops {
			switch op.Kind {
			case "pop":
				var in map[string]string
				json.Unmarshal(op.Input, &in)
				if in["group"] != g || op.Status != history.OK {
					continue
				}
				res.Ops++
				var out qPopOut
				json.Unmarshal(op.Output, &out)
				for _, m := range out.Messages {
					if !m.intact() {
						res.violate("group %s was served %s with data %s, not the payload pushed", g, m.TransactionID, m.Data)
					}
					it, known := acked[m.TransactionID]
					seen[m.TransactionID] = append(seen[m.TransactionID], delivery{op: op, msg: m, offset: it.Offset, known: known})
					if set := msgIDs[m.TransactionID]; set == nil {
						msgIDs[m.TransactionID] = map[string]bool{m.ID: true}
					} else {
						set[m.ID] = true
					}
				}
			case "ack":
				var in qAckIn
				json.Unmarshal(op.Input, &in)
				if in.Group != g || op.Status != history.OK {
					continue
				}
				res.Ops++
				var outs []qAckOut
				json.Unmarshal(op.Output, &outs)
				for k, out := range outs {
					if k >= len(in.IDs) || !out.Success {
						continue
					}
					id := in.IDs[k]
					if (in.Status == "completed" || out.DLQ) && consumedAt[id] == 0 {
						consumedAt[id] = op.Return
					}
					if in.Status == "failed" {
						failures[id]++
					}
				}
			}
		}
		for id := range acked {
			if len(seen[id]) == 0 && !dead[id] {
				res.Lost++
				res.violate("group %s never received acknowledged push %s", g, id)
			}
		}
		for id, ds := range seen {
			if t := consumedAt[id]; t != 0 {
				for _, d := range ds {
					if d.op.Call > t {
						res.violate("group %s got %s again at %s after acking it at %s", g, id, ms(d.op.Call), ms(t))
					}
				}
			}
			if failures[id] > q.retryLimit+1 {
				res.violate("group %s: %s failed %d times, retryLimit is %d", g, id, failures[id], q.retryLimit)
			}
		}
		q.checkOrder(g, seen, &res)
	}
	for id, set := range msgIDs {
		if len(set) > 1 {
			res.Duplicated++
			res.violate("%s was delivered as %d different messages", id, len(set))
		}
	}
	return res
}

// checkOrder: first deliveries of one partition to one group come in push
// order. Two first deliveries are out of order when the later message's pop
// returned before the earlier message's pop was called.
func (q *queueWL) checkOrder(g string, seen map[string][]delivery, res *Result) {
	byPart := map[string][]delivery{}
	for _, ds := range seen {
		first := ds[0]
		for _, d := range ds[1:] {
			if d.op.Call < first.op.Call {
				first = d
			}
		}
		if !first.known {
			continue // a push whose answer was lost: its offset is unknown
		}
		byPart[first.msg.PartitionID] = append(byPart[first.msg.PartitionID], first)
	}
	for p, ds := range byPart {
		sort.Slice(ds, func(i, j int) bool { return ds[i].offset < ds[j].offset })
		// Walking up the offsets, a pop that returned before the latest
		// call of a pop of any lower offset is out of order.
		var latest delivery
		for i, d := range ds {
			if i > 0 && d.op.Return < latest.op.Call {
				res.violate("group %s, partition %s: offset %d first delivered before offset %d", g, p, d.offset, latest.offset)
			}
			if i == 0 || d.op.Call > latest.op.Call {
				latest = d
			}
		}
	}
}

func ms(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }
