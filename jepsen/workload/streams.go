package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// streamsWL is a stream runtime's protocol (spec §4.16) under faults, as
// Queen's SDKs drive it: workers pop the source, read the query's state for
// the partition, fold the messages into per-window counts (window = the
// message's number / 10), and commit state, the closed windows' counts
// (pushed to the sink) and the ack in one cycle; flushers close windows the
// producer has finished with a cycle without an ack (delete + push), as an
// idle flush does. Workers crash before committing, or send the cycle and
// drop the answer and send it again (the SDK's HTTP client retries a lost
// answer). The checker adds every count the sink holds per (partition,
// window) and finds each pushed message counted exactly once.
type streamsWL struct {
	src, sink, query string
	queryID          string
	parts            int
	mu               sync.Mutex
	pushed           map[string]int  // "p@w" → messages pushed with a 201
	maybe            map[string]int  // "p@w" → messages whose push stayed unknown
	done             map[string]int  // partition → windows below this are all pushed
	pids             map[string]bool // partition ids seen (for the flushers)
}

const streamWindow = 10

func newStreams() *streamsWL {
	return &streamsWL{parts: 3, pushed: map[string]int{}, maybe: map[string]int{}, done: map[string]int{}, pids: map[string]bool{}}
}

func (s *streamsWL) Name() string { return "streams" }

func (s *streamsWL) Setup(ctx context.Context, env *Env) error {
	s.src = fmt.Sprintf("jepsen-stream-src-%d", env.Seed)
	s.sink = fmt.Sprintf("jepsen-stream-sink-%d", env.Seed)
	s.query = fmt.Sprintf("jepsen-count-%d", env.Seed)
	c := env.Client()
	if err := retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "POST", "/api/v1/configure", map[string]any{"queue": s.src,
			"options": map[string]any{"leaseTime": 2, "retryLimit": 100000, "retryDelay": 50}}, nil)
		return st == history.OK && r.Status == 200, err
	}); err != nil {
		return err
	}
	return retryDefinite(ctx, func() (bool, error) {
		r, st, err := c.Do(ctx, "POST", "/streams/v1/queries", map[string]any{"name": s.query, "source_queue": s.src,
			"sink_queue": s.sink, "config_hash": "count-by-10"}, nil)
		if st != history.OK || r.Status != 200 {
			return false, err
		}
		var out struct {
			QueryID string `json:"query_id"`
		}
		json.Unmarshal(r.Body, &out)
		s.queryID = out.QueryID
		return s.queryID != "", nil
	})
}

func (s *streamsWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.produce(ctx, env) }()
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); s.work(ctx, env, i, false) }(i)
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.flushLoop(ctx, env, 50) }()
	wg.Wait()
}

// produce pushes numbered messages round-robin over the partitions,
// retried until definite (deterministic transactionIds: a retry is a
// duplicate, stored once).
func (s *streamsWL) produce(ctx context.Context, env *Env) {
	c := env.Client()
	for i := 0; ctx.Err() == nil; i++ {
		p, n := fmt.Sprint("p", i%s.parts), i/s.parts
		key := fmt.Sprintf("%s@%d", p, n/streamWindow)
		id := fmt.Sprintf("%s-%d", p, n)
		item := map[string]any{"queue": s.src, "partition": p, "transactionId": id, "payload": map[string]any{"n": n}}
		unknown := false
		err := retryDefinite(ctx, func() (bool, error) {
			op := env.Rec.Begin(c.ID, "stream-push", id)
			r, st, err := c.Do(ctx, "POST", "/api/v1/push", map[string]any{"items": []any{item}}, nil)
			op.End(st, nil, err)
			unknown = unknown || st == history.Unknown
			return st == history.OK && r.Status == 201, err
		})
		s.mu.Lock()
		if err == nil {
			s.pushed[key]++
			if (n+1)%streamWindow == 0 {
				s.done[p] = (n + 1) / streamWindow
			}
		} else if unknown {
			s.maybe[key]++
		}
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

type streamRow struct {
	Key   string `json:"key"`
	Value struct {
		Count     int    `json:"count"`
		WindowEnd int    `json:"windowEnd"`
		Partition string `json:"partition"`
	} `json:"value"`
}

func (s *streamsWL) state(ctx context.Context, c *client.Client, pid string, ripe *int) ([]streamRow, bool) {
	body := map[string]any{"query_id": s.queryID, "partition_id": pid, "keys": nil}
	if ripe != nil {
		body["ripe_at_or_before"] = *ripe
	}
	r, st, _ := c.Do(ctx, "POST", "/streams/v1/state/get", body, nil)
	if st != history.OK || r.Status != 200 {
		return nil, false
	}
	var out struct {
		Rows []streamRow `json:"rows"`
	}
	json.Unmarshal(r.Body, &out)
	return out.Rows, true
}

// cycle sends a cycle; lossy: it may drop the answer and send it again.
func (s *streamsWL) cycle(ctx context.Context, env *Env, c *client.Client, rng *rand.Rand, kind string, body map[string]any, lossy bool) {
	op := env.Rec.Begin(c.ID, kind, body["partition_id"])
	if lossy && rng.Intn(8) == 0 {
		short, cancel := context.WithTimeout(ctx, 3*time.Millisecond)
		c.Do(short, "POST", "/streams/v1/cycle", body, nil)
		cancel()
	}
	r, st, err := c.Do(ctx, "POST", "/streams/v1/cycle", body, nil)
	var out struct {
		Success  bool   `json:"success"`
		Error    string `json:"error"`
		Replayed bool   `json:"replayed"`
	}
	if st == history.OK {
		json.Unmarshal(r.Body, &out)
	}
	op.End(st, out, err)
}

// work is a runtime's main loop: pop, read state, fold, commit.
func (s *streamsWL) work(ctx context.Context, env *Env, i int, drain bool) int {
	c := env.Client()
	rng := env.Rand(700 + i)
	handled := 0
	for ctx.Err() == nil {
		r, st, _ := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=streams.%s&subscriptionMode=all&batch=20&wait=true&timeout=500", s.src, s.query), nil, nil)
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
		handled += len(pop.Messages)
		if !drain && rng.Intn(12) == 0 {
			continue // crash: the lease runs out, the run comes again
		}
		pid, part := pop.Messages[0].PartitionID, pop.Messages[0].Partition
		s.mu.Lock()
		s.pids[pid] = true
		s.mu.Unlock()
		rows, ok := s.state(ctx, c, pid, nil)
		if !ok {
			continue
		}
		counts := map[int]int{}
		for _, row := range rows {
			counts[row.Value.WindowEnd] = row.Value.Count
		}
		top := -1
		for _, m := range pop.Messages {
			var d struct{ N int }
			json.Unmarshal(m.Data, &d)
			counts[d.N/streamWindow]++
			top = max(top, d.N/streamWindow)
		}
		var ops, pushes []any
		for w, n := range counts {
			key := fmt.Sprintf("w:%06d", w)
			if w < top-1 { // closed: emitted and deleted (a message two windows on arrived)
				ops = append(ops, map[string]any{"type": "delete", "key": key})
				pushes = append(pushes, map[string]any{"queue": s.sink, "partition": part, "payload": map[string]any{"partition": part, "window": w, "count": n}})
				continue
			}
			ops = append(ops, map[string]any{"type": "upsert", "key": key, "value": map[string]any{"count": n, "windowEnd": w, "partition": part}})
		}
		last := pop.Messages[len(pop.Messages)-1]
		s.cycle(ctx, env, c, rng, "stream-cycle", map[string]any{"query_id": s.queryID, "partition_id": pid, "consumer_group": "streams." + s.query,
			"state_ops": ops, "push_items": pushes, "release_lease": true,
			"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "status": "completed", "count": len(pop.Messages)}}, !drain)
	}
	return handled
}

// flushLoop closes, every interval, the windows of every partition the
// producer has finished pushing (all of them in the final flush).
func (s *streamsWL) flushLoop(ctx context.Context, env *Env, salt int) {
	for ctx.Err() == nil {
		s.flush(ctx, env, salt, false)
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (s *streamsWL) flush(ctx context.Context, env *Env, salt int, all bool) {
	c := env.Client()
	rng := env.Rand(900 + salt)
	s.mu.Lock()
	var pids []string
	for pid := range s.pids {
		pids = append(pids, pid)
	}
	s.mu.Unlock()
	sort.Strings(pids)
	for _, pid := range pids {
		ripe := 1 << 30
		rows, ok := s.state(ctx, c, pid, &ripe)
		if !ok || len(rows) == 0 {
			continue
		}
		var ops, pushes []any
		for _, row := range rows {
			if !all && !s.complete(row) {
				continue
			}
			ops = append(ops, map[string]any{"type": "delete", "key": row.Key})
			pushes = append(pushes, map[string]any{"queue": s.sink, "partition": row.Value.Partition,
				"payload": map[string]any{"partition": row.Value.Partition, "window": row.Value.WindowEnd, "count": row.Value.Count}})
		}
		if len(ops) == 0 {
			continue
		}
		s.cycle(ctx, env, c, rng, "stream-flush", map[string]any{"query_id": s.queryID, "partition_id": pid, "consumer_group": "streams." + s.query,
			"state_ops": ops, "push_items": pushes, "ack": nil, "release_lease": true}, !all)
	}
}

// complete reports whether a window's row counts every message that may
// have been pushed into it, so that no main loop will fold into it again:
// the only windows a flush may close before the end. A flush reads, then
// commits; the broker refuses its commit while a main loop holds the
// partition's lease, but a whole main-loop cycle can land between the two
// (pop, read, fold, commit, release), and the flush would then delete the
// row that cycle updated and emit the count it read before: the messages
// of that cycle would be counted nowhere. Queen's SDK flushes only ripe
// windows, which its main loop no longer updates (a late event goes to a
// new window or is dropped); "the producer has moved two windows on" was
// not such a rule here (a run whose worker crashed comes back after its
// lease), and lost 2 counts of a window once (a CI run of TestShortFaultRun,
// seed 292855883).
func (s *streamsWL) complete(row streamRow) bool {
	key := fmt.Sprintf("%s@%d", row.Value.Partition, row.Value.WindowEnd)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[row.Value.Partition] > row.Value.WindowEnd && row.Value.Count >= s.pushed[key]+s.maybe[key]
}

func (s *streamsWL) Finish(ctx context.Context, env *Env) error {
	quiet := 0
	for ctx.Err() == nil && quiet < 3 {
		if s.work(ctx, env, 99, true) == 0 {
			quiet++
			time.Sleep(time.Second)
		} else {
			quiet = 0
		}
	}
	// Close every window left open: flushes until the state is empty.
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		s.flush(ctx, env, 98, true)
		if s.stateEmpty(ctx, env) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return ctx.Err()
}

func (s *streamsWL) stateEmpty(ctx context.Context, env *Env) bool {
	c := env.Client()
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.pids {
		rows, ok := s.state(ctx, c, pid, nil)
		if !ok || len(rows) > 0 {
			return false
		}
	}
	return true
}

func (s *streamsWL) Check(env *Env) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := env.Client()
	counted := map[string]int{}
	group := fmt.Sprintf("audit-%d", time.Now().UnixNano())
	for i := 0; i < 1000 && ctx.Err() == nil; i++ {
		r, st, _ := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&subscriptionMode=all&batch=1000&autoAck=true", s.sink, group), nil, nil)
		if st != history.OK {
			continue
		}
		if r.Status == 204 {
			break
		}
		var pop struct {
			Messages []struct {
				Data struct {
					Partition string `json:"partition"`
					Window    int    `json:"window"`
					Count     int    `json:"count"`
				} `json:"data"`
			} `json:"messages"`
		}
		json.Unmarshal(r.Body, &pop)
		for _, m := range pop.Messages {
			counted[fmt.Sprintf("%s@%d", m.Data.Partition, m.Data.Window)] += m.Data.Count
		}
	}
	ops := 0
	for _, op := range env.Rec.Ops() {
		if strings.HasPrefix(op.Kind, "stream-") {
			ops++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return checkStreams(s.pushed, s.maybe, counted, ops)
}

// checkStreams compares the messages pushed per (partition, window) with
// the counts the sink holds for it: each pushed message counted exactly
// once; one whose push stayed unknown may or may not be.
func checkStreams(pushed, maybe, counted map[string]int, ops int) Result {
	res := Result{Ops: ops}
	keys := map[string]bool{}
	for k := range pushed {
		keys[k] = true
	}
	for k := range counted {
		keys[k] = true
	}
	for k := range keys {
		got, want, slack := counted[k], pushed[k], maybe[k]
		switch {
		case got < want:
			res.Lost += want - got
			res.violate("window %s: counted %d of the %d messages pushed into it", k, got, want)
		case got > want+slack:
			res.Duplicated += got - want - slack
			res.violate("window %s: counted %d, but %d were pushed (%d more unknown)", k, got, want, slack)
		}
	}
	return res
}
