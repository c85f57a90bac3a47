package workload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// timersWL: clients run transactions whose only part is the root "timers"
// array (sometimes with a KV marker beside it) that schedule, reschedule
// and cancel timers on a fresh queue, while faults happen. Every schedule
// carries a unique txn (the fired message's transactionId) and a delay of
// 0-3 s. After the faults heal, Finish waits until no timer is pending and
// every due time has passed, then drains the queue with a fresh consumer
// group.
//
// Each timer key belongs to one client, so the ops on a key are sequential
// and a definite answer says exactly which of our timers it acted on. After
// an op whose outcome is unknown the client moves to a fresh key: the
// unknown op may still apply at any time after its call, and nothing the
// client does later on that key could be told apart from it. An unknown op
// that carried a KV marker is resolved afterwards by reading the marker
// (the marker commits with the timers or not at all).
//
// What each answer proves (addendum §1.3, §1.6):
//   - scheduled: nothing was pending on the key, so the timer of the
//     previous schedule on it (if any, and not cancelled or replaced) had
//     already fired: it fires exactly once;
//   - rescheduled: a timer was pending and has been replaced whole: the
//     previous schedule's timer never fires;
//   - cancelled (txn X): X was pending and is gone: X never fires;
//   - absent: only "not pending now": the previous timer had fired (or had
//     ended before), so it fires exactly once.
//
// The checker then asks: did every timer known to be live at the end, or
// proven to have fired, fire exactly once; did any txn fire twice; did any
// fire before its deliverAt or under another message id than its schedule
// returned; did a cancelled, replaced or definitely failed schedule fire;
// did a txn nobody scheduled appear. Timers of unknown ops may fire at most
// once.
type timersWL struct {
	queue, ns string
	clients   int
	mu        sync.Mutex
	runEnd    time.Time
	facts     timerFacts
}

func newTimers() *timersWL { return &timersWL{clients: 4} }

func (t *timersWL) Name() string { return "timers" }

// History kinds.
const (
	timerKind        = "timer-txn"     // a transaction with timer ops
	timerDrainKind   = "timer-drain"   // a pop of the final drain
	timerMarkersKind = "timer-markers" // the read of the KV markers
	timerPendingKind = "timer-pending" // timers still pending when Finish gave up
)

// timerKeyPrefix starts every timer key (the count query needs a prefix).
const timerKeyPrefix = "k"

// timerOpIn is one element of the "timers" array.
type timerOpIn struct {
	Op        string  `json:"op"` // schedule | reschedule | cancel
	Key       string  `json:"key"`
	Txn       string  `json:"txn,omitempty"`
	DelayMs   float64 `json:"delayMs,omitempty"`
	Partition string  `json:"partition,omitempty"`
}

func (o timerOpIn) schedules() bool { return o.Op != "cancel" }

// timerTxnIn is one transaction.
type timerTxnIn struct {
	Timers []timerOpIn `json:"timers"`
	Marker string      `json:"marker,omitempty"` // a KV key putIfAbsent in the same transaction
}

// timerResult is a timer op's result in the transaction's answer.
type timerResult struct {
	OpIndex   int     `json:"opIndex"`
	Ok        bool    `json:"ok"`
	Status    string  `json:"status"`
	TimerKey  string  `json:"timerKey"`
	Txn       *string `json:"txn"`
	MessageID string  `json:"messageId,omitempty"`
	DeliverAt string  `json:"deliverAt,omitempty"`
}

type timerTxnOut struct {
	Results []timerResult `json:"results"`
}

// timerFired is a message of the drained queue.
type timerFired struct {
	ID        string `json:"id"`
	Txn       string `json:"transactionId"`
	CreatedAt string `json:"createdAt"`
	Partition string `json:"partition"`
}

// timerFacts is what Finish learnt after the run.
type timerFacts struct {
	Fired   []timerFired
	Markers map[string]bool // marker → committed; a missing entry is unknown
	Dead    map[string]bool // txns dead-lettered under __timer__
}

func (t *timersWL) Setup(ctx context.Context, env *Env) error {
	stamp := time.Now().Unix()
	t.queue = fmt.Sprintf("jepsen-timers-%d-%d", env.Seed, stamp)
	t.ns = fmt.Sprintf("jepsen-timers-%d-%d", env.Seed, stamp)
	c := env.Client()
	body := map[string]any{"queue": t.queue, "options": map[string]any{"leaseTime": 2, "retryLimit": 1000}}
	return retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "POST", "/api/v1/configure", body, nil)
		return st == history.OK && r.Status == 200, err
	})
}

func (t *timersWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for i := 0; i < t.clients; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); t.work(ctx, env, i) }(i)
	}
	wg.Wait()
	t.mu.Lock()
	t.runEnd = time.Now()
	t.mu.Unlock()
}

// work is one client with three live keys of its own.
func (t *timersWL) work(ctx context.Context, env *Env, i int) {
	c := env.Client()
	rng := env.Rand(500 + i)
	next := 0
	newKey := func() string { next++; return fmt.Sprintf("%s%d-%d", timerKeyPrefix, i, next) }
	keys := []string{newKey(), newKey(), newKey()}
	seq := 0
	for ctx.Err() == nil {
		n := 1
		if rng.Intn(4) == 0 {
			n = 2
		}
		picked := rng.Perm(len(keys))[:n]
		var in timerTxnIn
		for _, ix := range picked {
			op := timerOpIn{Key: keys[ix], Op: "cancel"}
			if rng.Intn(10) < 6 {
				op.Op = "schedule"
				if rng.Intn(3) == 0 {
					op.Op = "reschedule"
				}
				seq++
				op.Txn = fmt.Sprintf("t%d-%d-%d", env.Seed, i, seq)
				op.Partition = fmt.Sprint("p", rng.Intn(3))
				if rng.Intn(10) > 0 {
					op.DelayMs = float64(rng.Intn(3_000_000)) / 1000
				}
			}
			in.Timers = append(in.Timers, op)
		}
		if rng.Intn(3) == 0 {
			seq++
			in.Marker = fmt.Sprintf("m%d-%d", i, seq)
		}
		if t.do(ctx, env, c, in) == history.Unknown {
			for _, ix := range picked {
				keys[ix] = newKey() // the unknown op may still land: leave the key
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.Intn(600)) * time.Millisecond):
		}
	}
}

// do runs and records one transaction.
func (t *timersWL) do(ctx context.Context, env *Env, c *client.Client, in timerTxnIn) history.Status {
	var ops []any
	for _, o := range in.Timers {
		op := map[string]any{"op": o.Op, "queue": t.queue, "timerKey": o.Key}
		if o.schedules() {
			payload, _ := json.Marshal(map[string]string{"txn": o.Txn, "key": o.Key})
			op["txn"] = o.Txn
			op["delayMs"] = o.DelayMs
			op["partition"] = o.Partition
			op["payload"] = base64.StdEncoding.EncodeToString(payload)
		}
		ops = append(ops, op)
	}
	body := map[string]any{"timers": ops}
	if in.Marker != "" {
		body["kv"] = []any{map[string]any{"op": "putIfAbsent", "ns": t.ns, "key": in.Marker,
			"value": true, "forever": true, "required": true}}
	}
	p := env.Rec.Begin(c.ID, timerKind, in)
	r, st, err := c.Do(ctx, "POST", "/api/v1/transaction", body, nil)
	if st != history.OK {
		p.End(st, nil, err)
		return st
	}
	if r.Status != 200 {
		p.End(history.Fail, nil, fmt.Errorf("status %d: %s", r.Status, bytes.TrimSpace(r.Body)))
		return history.Fail
	}
	out, ok, err := parseTimerAnswer(r.Body, in)
	switch {
	case err != nil:
		p.End(history.Unknown, nil, fmt.Errorf("%s%v", timerMalformed, err))
		return history.Unknown
	case !ok: // rolled back: nothing happened
		p.End(history.Fail, nil, fmt.Errorf("rolled back: %s", bytes.TrimSpace(r.Body)))
		return history.Fail
	}
	p.End(history.OK, out, nil)
	return history.OK
}

// timerMalformed starts the error of an op whose 200 answer made no sense.
const timerMalformed = "malformed answer: "

// parseTimerAnswer reads a transaction verdict. ok=false is a rollback.
func parseTimerAnswer(body []byte, in timerTxnIn) (timerTxnOut, bool, error) {
	var ans struct {
		Success bool `json:"success"`
		Results []struct {
			Type string `json:"type"`
			timerResult
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return timerTxnOut{}, false, fmt.Errorf("%v: %s", err, body)
	}
	if !ans.Success {
		return timerTxnOut{}, false, nil
	}
	var out timerTxnOut
	for _, r := range ans.Results {
		if r.Type == "timer" {
			out.Results = append(out.Results, r.timerResult)
		}
	}
	if len(out.Results) != len(in.Timers) {
		return out, false, fmt.Errorf("%d timer results for %d timer ops: %s", len(out.Results), len(in.Timers), body)
	}
	for i, r := range out.Results {
		if r.OpIndex != i || r.TimerKey != in.Timers[i].Key {
			return out, false, fmt.Errorf("timer result %d is op %d on %q, want op %d on %q: %s", i, r.OpIndex, r.TimerKey, i, in.Timers[i].Key, body)
		}
	}
	return out, true, nil
}

// Finish waits until nothing is pending and every due time has passed,
// drains the queue with a fresh group, reads the markers and the timer
// dead letters.
func (t *timersWL) Finish(ctx context.Context, env *Env) error {
	c := env.Client()
	t.mu.Lock()
	due := t.runEnd.Add(3500 * time.Millisecond) // the longest delay is 3 s
	t.mu.Unlock()
	var errs []string
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := t.waitIdle(waitCtx, c, due); err != nil {
		errs = append(errs, err.Error())
		t.recordPending(ctx, env, c)
	}
	cancel()
	fired, err := t.drain(ctx, env, c)
	if err != nil {
		errs = append(errs, err.Error())
	}
	markers, err := t.readMarkers(ctx, env, c)
	if err != nil {
		errs = append(errs, err.Error())
	}
	dead, err := t.deadLetters(ctx, c)
	if err != nil {
		errs = append(errs, err.Error())
	}
	t.mu.Lock()
	t.facts = timerFacts{Fired: fired, Markers: markers, Dead: dead}
	t.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// waitIdle polls the pending count (a linearizable read) until it is zero
// twice in a row after every due time.
func (t *timersWL) waitIdle(ctx context.Context, c *client.Client, due time.Time) error {
	zeros, last := 0, -1
	path := fmt.Sprintf("/api/v1/timers/%s?mode=count&prefix=%s", url.PathEscape(t.queue), timerKeyPrefix)
	for {
		r, st, _ := c.Do(ctx, "GET", path, nil, nil)
		if st == history.OK && r.Status == 200 {
			var out struct {
				Count *int `json:"count"`
			}
			if json.Unmarshal(r.Body, &out) == nil && out.Count != nil {
				last = *out.Count
				if last == 0 && time.Now().After(due) {
					zeros++
					if zeros == 2 {
						return nil
					}
				} else {
					zeros = 0
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timers still pending when Finish stopped waiting (last count %d)", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// recordPending puts the still pending timers into the history (report).
func (t *timersWL) recordPending(ctx context.Context, env *Env, c *client.Client) {
	p := env.Rec.Begin(c.ID, timerPendingKind, t.queue)
	r, st, err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/timers/%s?limit=1000", url.PathEscape(t.queue)), nil, nil)
	if st == history.OK && r.Status == 200 {
		p.End(history.OK, json.RawMessage(r.Body), nil)
		return
	}
	p.End(st, nil, err)
}

// drain pops everything with a fresh group and acks it. A lost pop answer
// leaves its messages leased; they come back after the lease (2 s), so the
// drain ends only after three empty long-polls a second apart.
func (t *timersWL) drain(ctx context.Context, env *Env, c *client.Client) ([]timerFired, error) {
	group := fmt.Sprintf("drain-%d", time.Now().UnixNano())
	path := fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&subscriptionMode=all&batch=1000&partitions=16&wait=true&timeout=500",
		url.PathEscape(t.queue), group)
	var fired []timerFired
	empty := 0
	for empty < 3 {
		if ctx.Err() != nil {
			return fired, fmt.Errorf("drain did not finish: %v", ctx.Err())
		}
		p := env.Rec.Begin(c.ID, timerDrainKind, group)
		r, st, err := c.Do(ctx, "GET", path, nil, nil)
		if st != history.OK {
			p.End(st, nil, err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var out struct {
			Messages []struct {
				timerFired
				PartitionID string `json:"partitionId"`
				LeaseID     string `json:"leaseId"`
			} `json:"messages"`
		}
		if r.Status == 200 {
			json.Unmarshal(r.Body, &out)
		}
		var got []timerFired
		for _, m := range out.Messages {
			got = append(got, m.timerFired)
		}
		p.End(history.OK, got, nil)
		if len(got) == 0 {
			empty++
			time.Sleep(time.Second)
			continue
		}
		empty = 0
		fired = append(fired, got...)
		var acks []any
		for _, m := range out.Messages {
			acks = append(acks, map[string]any{"transactionId": m.Txn, "partitionId": m.PartitionID,
				"leaseId": m.LeaseID, "status": "completed"})
		}
		c.Do(ctx, "POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, nil)
	}
	return fired, nil
}

// readMarkers reads every marker of the run (getMany, 500 at a time).
func (t *timersWL) readMarkers(ctx context.Context, env *Env, c *client.Client) (map[string]bool, error) {
	var all []string
	for _, op := range env.Rec.Ops() {
		if op.Kind != timerKind {
			continue
		}
		var in timerTxnIn
		if json.Unmarshal(op.Input, &in) == nil && in.Marker != "" {
			all = append(all, in.Marker)
		}
	}
	out := map[string]bool{}
	for len(all) > 0 {
		batch := all[:min(500, len(all))]
		all = all[len(batch):]
		p := env.Rec.Begin(c.ID, timerMarkersKind, batch)
		var found []string
		err := retryDefinite(ctx, func() (bool, error) {
			r, st, err := c.Do(ctx, "POST", "/api/v1/kv", map[string]any{"operations": []any{
				map[string]any{"op": "getMany", "ns": t.ns, "keys": batch}}}, nil)
			if st != history.OK || r.Status != 200 {
				return false, err
			}
			var ans struct {
				Results []struct {
					Rows []struct {
						Key string `json:"key"`
					} `json:"rows"`
					Missing []string `json:"missing"`
				} `json:"results"`
			}
			if json.Unmarshal(r.Body, &ans) != nil || len(ans.Results) != 1 {
				return false, fmt.Errorf("getMany answered %s", r.Body)
			}
			found = found[:0]
			for _, row := range ans.Results[0].Rows {
				found = append(found, row.Key)
			}
			if len(found)+len(ans.Results[0].Missing) != len(batch) {
				return false, fmt.Errorf("getMany of %d keys answered %d rows and %d missing", len(batch), len(found), len(ans.Results[0].Missing))
			}
			return true, nil
		})
		if err != nil {
			p.End(history.Unknown, nil, err)
			return out, fmt.Errorf("reading the markers: %w", err)
		}
		p.End(history.OK, found, nil)
		for _, m := range batch {
			out[m] = false
		}
		for _, m := range found {
			out[m] = true
		}
	}
	return out, nil
}

// deadLetters lists the txns filed under __timer__ in the queue's DLQ.
func (t *timersWL) deadLetters(ctx context.Context, c *client.Client) (map[string]bool, error) {
	out := map[string]bool{}
	err := retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/dlq?queue=%s&consumerGroup=__timer__&limit=10000", url.QueryEscape(t.queue)), nil, nil)
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
	return out, err
}

func (t *timersWL) Check(env *Env) Result {
	t.mu.Lock()
	facts := t.facts
	t.mu.Unlock()
	res, txns := judgeTimers(env.Rec.Ops(), facts)
	if env.Logf != nil {
		n := map[string]int{}
		for _, ti := range txns {
			n[[]string{"fate at-most-once", "fate once", "fate never"}[ti.fate]]++
		}
		for _, op := range env.Rec.Ops() {
			if op.Kind != timerKind {
				continue
			}
			n[string(op.Status)]++
			if op.Status == history.Fail && n["fail"] <= 3 {
				env.Logf("timers: failed: %s", op.Err)
			}
			var out timerTxnOut
			json.Unmarshal(op.Output, &out)
			for _, r := range out.Results {
				n[r.Status]++
			}
		}
		env.Logf("timers: %d transactions %v; %d messages drained, %d markers read; lost=%d duplicated=%d violations=%d",
			res.Ops, n, len(facts.Fired), len(facts.Markers), res.Lost, res.Duplicated, len(res.Violations))
	}
	return res
}

// The checker.

// timerFate is what the history proves about one txn's timer.
type timerFate int

const (
	fateAtMostOnce timerFate = iota // unknown: it may or may not fire, never twice
	fateOnce                        // it must fire exactly once
	fateNever                       // it must never fire
)

type timerTxnInfo struct {
	key       string
	fate      timerFate
	why       string
	partition string // the schedule's destination partition
	deliverAt string // from the schedule's answer
	messageID string // from the schedule's answer
}

// timerEvent is one timer op of one transaction, in the key's order.
type timerEvent struct {
	op      history.Op
	in      timerOpIn
	res     *timerResult // the op's result, when the transaction answered
	applied int          // 1 yes, 0 no, -1 unknown
	last    bool         // the key's last op
}

func checkTimers(ops []history.Op, facts timerFacts) Result {
	res, _ := judgeTimers(ops, facts)
	return res
}

// judgeTimers is checkTimers that also returns each txn's fate.
func judgeTimers(ops []history.Op, facts timerFacts) (Result, map[string]*timerTxnInfo) {
	var res Result
	txns := map[string]*timerTxnInfo{}
	byKey := map[string][]timerEvent{}
	var keys []string
	for _, op := range ops {
		if op.Kind != timerKind {
			continue
		}
		res.Ops++
		if strings.HasPrefix(op.Err, timerMalformed) {
			res.violate("timer transaction answered 200 with a %s", op.Err)
		}
		var in timerTxnIn
		if json.Unmarshal(op.Input, &in) != nil {
			continue
		}
		var out timerTxnOut
		if op.Status == history.OK {
			json.Unmarshal(op.Output, &out)
		}
		applied := 0
		switch {
		case op.Status == history.OK:
			applied = 1
		case op.Status == history.Unknown:
			applied = -1
			if found, known := facts.Markers[in.Marker]; in.Marker != "" && known {
				applied = 0
				if found {
					applied = 1
				}
			}
		}
		for i, o := range in.Timers {
			e := timerEvent{op: op, in: o, applied: applied}
			if op.Status == history.OK && i < len(out.Results) {
				r := out.Results[i]
				e.res = &r
			}
			if _, ok := byKey[o.Key]; !ok {
				keys = append(keys, o.Key)
			}
			byKey[o.Key] = append(byKey[o.Key], e)
			if o.schedules() {
				txns[o.Txn] = &timerTxnInfo{key: o.Key, partition: o.Partition, fate: fateAtMostOnce, why: "its outcome is unknown"}
			}
		}
	}
	set := func(txn string, fate timerFate, why string) {
		if ti := txns[txn]; ti != nil {
			ti.fate, ti.why = fate, why
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		evs := byKey[key]
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].op.Call < evs[j].op.Call })
		evs[len(evs)-1].last = true
		checkTimerKey(key, evs, txns, set, &res)
	}

	// The drained messages: distinct stored messages per txn (a message
	// redelivered by the drain keeps its id and createdAt).
	stored := map[string]map[string]timerFired{}
	var firedTxns []string
	for _, m := range facts.Fired {
		if stored[m.Txn] == nil {
			stored[m.Txn] = map[string]timerFired{}
			firedTxns = append(firedTxns, m.Txn)
		}
		stored[m.Txn][m.ID+"@"+m.CreatedAt] = m
	}
	sort.Strings(firedTxns)
	for _, txn := range firedTxns {
		ms := stored[txn]
		ti := txns[txn]
		if ti == nil {
			res.violate("a message with transactionId %q fired, which no op of ours scheduled", txn)
			continue
		}
		if len(ms) > 1 {
			res.Duplicated++
			var as []string
			for k := range ms {
				as = append(as, k)
			}
			sort.Strings(as)
			res.violate("timer %s (key %s) fired %d times: %s", txn, ti.key, len(ms), strings.Join(as, ", "))
		}
		if ti.fate == fateNever {
			res.violate("timer %s (key %s) fired, but %s", txn, ti.key, ti.why)
		}
		for _, m := range ms {
			if ti.partition != "" && m.Partition != ti.partition {
				res.violate("timer %s fired into partition %q, its schedule named %q", txn, m.Partition, ti.partition)
			}
			if ti.messageID != "" && m.ID != ti.messageID {
				res.violate("timer %s fired as message %s, its schedule returned messageId %s", txn, m.ID, ti.messageID)
			}
			if ti.deliverAt == "" {
				continue
			}
			created, err1 := time.Parse(time.RFC3339Nano, m.CreatedAt)
			due, err2 := time.Parse(time.RFC3339Nano, ti.deliverAt)
			switch {
			case err1 != nil || err2 != nil:
				res.violate("timer %s: unreadable times createdAt %q, deliverAt %q", txn, m.CreatedAt, ti.deliverAt)
			case created.Before(due):
				res.violate("timer %s fired early: message createdAt %s, deliverAt %s (%v early)", txn, m.CreatedAt, ti.deliverAt, due.Sub(created))
			}
		}
	}
	var once []string
	for txn, ti := range txns {
		if ti.fate == fateOnce && len(stored[txn]) == 0 {
			once = append(once, txn)
		}
		if facts.Dead[txn] {
			res.violate("timer %s (key %s) was dead-lettered under __timer__: its fire was refused 5 times", txn, ti.key)
		}
	}
	sort.Strings(once)
	for _, txn := range once {
		if facts.Dead[txn] {
			continue
		}
		res.Lost++
		res.violate("timer %s (key %s) never fired, but %s", txn, txns[txn].key, txns[txn].why)
	}
	return res, txns
}

// checkTimerKey walks one key's ops in order and decides each txn's fate.
// pend is the txn of the latest schedule that took effect and has not been
// shown to be replaced or cancelled: its timer is pending or has fired.
func checkTimerKey(key string, evs []timerEvent, txns map[string]*timerTxnInfo, set func(string, timerFate, string), res *Result) {
	pend := ""
	certain := true // false once an op of unknown order or outcome leaves pend unclear
	var prevReturn int64
	for i, e := range evs {
		at := fmt.Sprintf("%s op at %s", e.in.Op, ms(e.op.Call))
		if i > 0 && e.op.Call < prevReturn && certain {
			// Two ops on the key in flight at once: their order is unknown.
			if pend != "" {
				set(pend, fateAtMostOnce, "ops on its key overlapped")
			}
			pend, certain = "", false
		}
		prevReturn = max(prevReturn, e.op.Return)
		if e.in.schedules() && e.res != nil {
			if ti := txns[e.in.Txn]; ti != nil {
				ti.deliverAt, ti.messageID = e.res.DeliverAt, e.res.MessageID
			}
			if e.res.Txn == nil || *e.res.Txn != e.in.Txn {
				res.violate("key %s: %s scheduled txn %s but the result names txn %v", key, at, e.in.Txn, strOrNil(e.res.Txn))
			}
		}
		if e.applied == 0 {
			if e.in.schedules() {
				set(e.in.Txn, fateNever, fmt.Sprintf("its transaction (%s) did not commit", at))
			}
			continue
		}
		if !certain {
			// Only what an answer proves by itself.
			switch {
			case e.res != nil && e.res.Status == "cancelled" && e.res.Txn != nil:
				set(*e.res.Txn, fateNever, fmt.Sprintf("%s cancelled it", at))
			}
			continue
		}
		if e.applied < 0 || e.res == nil {
			// It may apply at any time after its call (or, resolved by its
			// marker, it did): whatever was pending may fire or may have
			// been replaced or cancelled by it.
			if pend != "" {
				set(pend, fateAtMostOnce, fmt.Sprintf("the %s of unknown outcome may have replaced or cancelled it", at))
			}
			pend = ""
			if e.in.schedules() && e.applied > 0 && e.last {
				// It took effect, and nothing touched the key after it.
				pend = e.in.Txn
				continue
			}
			certain = false
			continue
		}
		switch e.in.schedules() {
		case true:
			switch e.res.Status {
			case "rescheduled":
				if pend == "" {
					res.violate("key %s: %s (txn %s) answered rescheduled, but no timer of ours could be pending", key, at, e.in.Txn)
				} else {
					set(pend, fateNever, fmt.Sprintf("%s (txn %s) answered rescheduled: it replaced it", at, e.in.Txn))
				}
			case "scheduled":
				if pend != "" {
					set(pend, fateOnce, fmt.Sprintf("%s (txn %s) answered scheduled: it was no longer pending, so it had fired", at, e.in.Txn))
				}
			default:
				res.violate("key %s: %s (txn %s) answered status %q", key, at, e.in.Txn, e.res.Status)
			}
			pend = e.in.Txn
		case false:
			switch e.res.Status {
			case "cancelled":
				got := strOrNil(e.res.Txn)
				switch {
				case pend == "":
					res.violate("key %s: %s cancelled txn %s, but no timer of ours could be pending", key, at, got)
				case got != pend:
					res.violate("key %s: %s cancelled txn %s, but the pending one was %s", key, at, got, pend)
					set(pend, fateAtMostOnce, "a cancel on its key named another txn")
				}
				if e.res.Txn != nil {
					set(*e.res.Txn, fateNever, fmt.Sprintf("%s cancelled it", at))
				}
			case "absent":
				if pend != "" {
					set(pend, fateOnce, fmt.Sprintf("%s answered absent: it was no longer pending, so it had fired", at))
				}
			default:
				res.violate("key %s: %s answered status %q", key, at, e.res.Status)
			}
			pend = ""
		}
	}
	if certain && pend != "" {
		set(pend, fateOnce, "it was the last timer on its key: nothing replaced or cancelled it")
	}
}

func strOrNil(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
