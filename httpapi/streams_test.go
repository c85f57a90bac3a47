package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

type cycleOut struct {
	Success         bool   `json:"success"`
	Error           string `json:"error"`
	StateOpsApplied int    `json:"state_ops_applied"`
	PushResults     []struct {
		Status    string `json:"status"`
		QueueName string `json:"queueName"`
	} `json:"push_results"`
	AckResult *struct {
		Success       bool `json:"success"`
		LeaseReleased bool `json:"lease_released"`
		Count         int  `json:"count"`
	} `json:"ack_result"`
	Replayed bool `json:"replayed"`
}

type stateRows struct {
	Success bool `json:"success"`
	Rows    []struct {
		Key       string         `json:"key"`
		Value     map[string]any `json:"value"`
		UpdatedAt string         `json:"updated_at"`
	} `json:"rows"`
}

func (l *live) streamPop(queue, group string, batch int) []popMsg {
	l.t.Helper()
	var pop struct{ Messages []popMsg }
	code, b := l.do("GET", fmt.Sprintf("/api/v1/pop/queue/%s?consumerGroup=%s&batch=%d&subscriptionMode=all", queue, group, batch), "")
	if code == 204 {
		return nil
	}
	if code != 200 {
		l.t.Fatalf("pop: %d %s", code, b)
	}
	if err := json.Unmarshal(b, &pop); err != nil {
		l.t.Fatal(err)
	}
	return pop.Messages
}

func (l *live) cycle(body string) cycleOut {
	l.t.Helper()
	var out cycleOut
	l.json("POST", "/streams/v1/cycle", body, 200, &out)
	return out
}

func (l *live) state(qid, pid, extra string) stateRows {
	l.t.Helper()
	var out stateRows
	l.json("POST", "/streams/v1/state/get", fmt.Sprintf(`{"query_id":%q,"partition_id":%q%s}`, qid, pid, extra), 200, &out)
	return out
}

// The three stream routes (spec §4.16) as a runtime drives them: register
// (idempotent by name, 409 on a changed hash, reset starting over), a cycle
// committing state, sink pushes and the ack in one entry, state/get with
// its filters, a stale lease rolling the whole cycle back, a retried cycle
// applied once, and the two rules that fence a flush (ack null).
func TestStreamRoutes(t *testing.T) {
	l := startLive(t)
	var reg struct {
		Success bool   `json:"success"`
		QueryID string `json:"query_id"`
		Fresh   bool   `json:"fresh"`
		Reset   bool   `json:"reset"`
	}
	l.json("POST", "/streams/v1/queries", `{"name":"counts","source_queue":"src","sink_queue":"sink","config_hash":"h1","reset":false}`, 200, &reg)
	if !reg.Success || !reg.Fresh || reg.Reset || len(reg.QueryID) != 36 {
		t.Fatalf("register: %+v", reg)
	}
	qid := reg.QueryID
	l.json("POST", "/streams/v1/queries", `{"name":"counts","source_queue":"src","sink_queue":"sink","config_hash":"h1"}`, 200, &reg)
	if reg.Fresh || reg.QueryID != qid {
		t.Fatalf("second register: %+v", reg)
	}
	if code, b := l.do("POST", "/streams/v1/queries", `{"name":"counts","source_queue":"src","config_hash":"h2"}`); code != 409 || !strings.Contains(string(b), "config_hash mismatch") {
		t.Fatalf("changed hash: %d %s", code, b)
	}

	l.json("POST", "/api/v1/push", `{"items":[{"queue":"src","partition":"p","transactionId":"m1","payload":{"n":1}},
		{"queue":"src","partition":"p","transactionId":"m2","payload":{"n":2}},{"queue":"src","partition":"p","transactionId":"m3","payload":{"n":3}}]}`, 201, nil)
	msgs := l.streamPop("src", "streams.counts", 10)
	if len(msgs) != 3 {
		t.Fatalf("popped %d", len(msgs))
	}
	pid, lease := msgs[0].PartitionID, msgs[0].LeaseID
	body := func(ops, pushes, ack string, release bool) string {
		return fmt.Sprintf(`{"query_id":%q,"partition_id":%q,"consumer_group":"streams.counts","state_ops":%s,"push_items":%s,"ack":%s,"release_lease":%t}`,
			qid, pid, ops, pushes, ack, release)
	}
	ack := func(txn, lease string, count int) string {
		return fmt.Sprintf(`{"transactionId":%q,"leaseId":%q,"status":"completed","count":%d}`, txn, lease, count)
	}
	// A stale lease: nothing of the cycle is applied.
	c := l.cycle(body(`[{"type":"upsert","key":"w\u001f1","value":{"acc":3,"windowEnd":1000}}]`, `[{"queue":"sink","partition":"p","payload":{"count":3}}]`,
		ack("m3", "not-the-lease", 3), true))
	if c.Success || !strings.Contains(c.Error, "lease") {
		t.Fatalf("a cycle under a stale lease: %+v", c)
	}
	if rows := l.state(qid, pid, `,"keys":null`).Rows; len(rows) != 0 {
		t.Fatalf("state after a refused cycle: %+v", rows)
	}
	// The real one.
	good := body(`[{"type":"upsert","key":"w\u001f1","value":{"acc":3,"windowEnd":1000}},{"type":"upsert","key":"w\u001f2","value":{"acc":0,"windowEnd":5000}},{"type":"upsert","key":"x","value":{"acc":1}}]`,
		`[{"queue":"sink","partition":"p","payload":{"count":3}}]`, ack("m3", lease, 3), true)
	c = l.cycle(good)
	if !c.Success || c.StateOpsApplied != 3 || len(c.PushResults) != 1 || c.PushResults[0].Status != "queued" || c.AckResult == nil || !c.AckResult.LeaseReleased || c.AckResult.Count != 3 {
		t.Fatalf("cycle: %+v", c)
	}
	// Its retry (the answer lost) applies nothing again.
	if c = l.cycle(good); !c.Success || !c.Replayed {
		t.Fatalf("a retried cycle: %+v", c)
	}
	if n := len(l.streamPop("sink", "check", 10)); n != 1 {
		t.Fatalf("sink holds %d messages, want 1", n)
	}
	if len(l.streamPop("src", "streams.counts", 10)) != 0 {
		t.Fatal("the acked messages came again")
	}
	// state/get: all, by keys, by prefix, ripe.
	all := l.state(qid, pid, "")
	if len(all.Rows) != 3 || all.Rows[0].Key != "w\x1f1" || all.Rows[0].Value["acc"] != float64(3) || all.Rows[0].UpdatedAt == "" {
		t.Fatalf("all rows: %+v", all)
	}
	if rows := l.state(qid, pid, `,"keys":["x","nope"]`).Rows; len(rows) != 1 || rows[0].Key != "x" {
		t.Fatalf("by keys: %+v", rows)
	}
	if rows := l.state(qid, pid, `,"keys":[],"key_prefix":"w\u001f","ripe_at_or_before":2000`).Rows; len(rows) != 1 || rows[0].Key != "w\x1f1" {
		t.Fatalf("ripe by prefix: %+v", rows)
	}
	// A flush (ack null) deletes what it read and emits; a second flusher of
	// the same window loses: nothing of it is applied.
	flush := body(`[{"type":"delete","key":"w\u001f1"}]`, `[{"queue":"sink","partition":"p","payload":{"count":3,"flushed":true}}]`, "null", true)
	if c = l.cycle(flush); !c.Success {
		t.Fatalf("flush: %+v", c)
	}
	if c = l.cycle(flush); c.Success || !strings.Contains(c.Error, "already deleted") {
		t.Fatalf("a second flush of the same window: %+v", c)
	}
	if n := len(l.streamPop("sink", "check2", 10)); n != 2 {
		t.Fatalf("the sink holds %d, want 2 (the cycle's and one flush's)", n)
	}
	// A flush while a worker holds the partition is refused.
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"src","partition":"p","transactionId":"m4"},{"queue":"src","partition":"p","transactionId":"m5"}]}`, 201, nil)
	held := l.streamPop("src", "streams.counts", 10)
	if c = l.cycle(body(`[{"type":"delete","key":"x"}]`, `[]`, "null", true)); c.Success || !strings.Contains(c.Error, "lease") {
		t.Fatalf("a flush under a worker's lease: %+v", c)
	}
	// release_lease:false keeps the lease over the rest of the run (a gate
	// that let the first through): the partition stays held.
	if c = l.cycle(body(`[]`, `[]`, ack("m4", held[0].LeaseID, 1), false)); !c.Success || c.AckResult.LeaseReleased {
		t.Fatalf("ack without release: %+v", c)
	}
	if n := len(l.streamPop("src", "streams.counts", 10)); n != 0 {
		t.Fatalf("the held rest was delivered again at once: %d", n)
	}

	// Reset with a new hash wipes the state; the id stays.
	l.json("POST", "/streams/v1/queries", `{"name":"counts","source_queue":"src","sink_queue":"sink","config_hash":"h2","reset":true}`, 200, &reg)
	if !reg.Reset || reg.QueryID != qid {
		t.Fatalf("reset: %+v", reg)
	}
	if rows := l.state(qid, pid, "").Rows; len(rows) != 0 {
		t.Fatalf("state after reset: %+v", rows)
	}

	// Bad input: 400 and nothing applied.
	for _, bad := range []struct{ path, body, want string }{
		{"/streams/v1/queries", `{"source_queue":"src","config_hash":"h"}`, "name is required"},
		{"/streams/v1/queries", `{"name":"a","config_hash":"h"}`, "source_queue is required"},
		{"/streams/v1/queries", `{"name":"a","source_queue":"s"}`, "config_hash is required"},
		{"/streams/v1/queries", `{"name":"a","source_queue":"s","config_hash":"h","tenant":"t"}`, "unknown field"},
		{"/streams/v1/cycle", body(`[]`, `[]`, "null", true)[:len(body(`[]`, `[]`, "null", true))-1] + `,"extra":1}`, "unknown field"},
		{"/streams/v1/cycle", `{"query_id":"x","partition_id":"` + pid + `"}`, "query_id must be a UUID"},
		{"/streams/v1/cycle", body(`[{"type":"merge","key":"k"}]`, `[]`, "null", true), "type must be"},
		{"/streams/v1/cycle", body(`[{"type":"upsert","key":"k","value":"`+strings.Repeat("v", 70<<10)+`"}]`, `[]`, "null", true), "at most 65536"},
		{"/streams/v1/cycle", body(`[]`, `[]`, `{"transactionId":"m4"}`, true), "leaseId is required"},
		{"/streams/v1/cycle", body(`[]`, `[]`, `{"transactionId":"m4","leaseId":"l","extra":1}`, true), "unknown field"},
		{"/streams/v1/state/get", `{"query_id":"` + qid + `"}`, "partition_id is required"},
		{"/streams/v1/state/get", `{"query_id":"` + qid + `","partition_id":"` + pid + `","ripe_at_or_before":"soon"}`, "ripe_at_or_before"},
	} {
		if code, b := l.do("POST", bad.path, bad.body); code != 400 || !strings.Contains(string(b), bad.want) {
			t.Errorf("%s %.80s: %d %s, want 400 %q", bad.path, bad.body, code, b, bad.want)
		}
	}
	ops := make([]string, 1001)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"type":"delete","key":"k%d"}`, i)
	}
	if code, b := l.do("POST", "/streams/v1/cycle", body("["+strings.Join(ops, ",")+"]", `[]`, "null", true)); code != 400 || !strings.Contains(string(b), "at most 1000") {
		t.Errorf("1001 state ops: %d %s", code, b)
	}

	// The operator lists and deletes queries; the state goes with them.
	var list struct {
		Queries []struct{ Name, SourceQueue string } `json:"queries"`
	}
	l.json("GET", "/streams/v1/queries", "", 200, &list)
	if len(list.Queries) != 1 || list.Queries[0].Name != "counts" {
		t.Fatalf("list: %+v", list)
	}
	l.json("DELETE", "/streams/v1/queries/counts", "", 200, nil)
	if code, _ := l.do("DELETE", "/streams/v1/queries/counts", ""); code != 404 {
		t.Errorf("second delete: %d", code)
	}
	if c = l.cycle(body(`[]`, `[]`, "null", true)); c.Success || !strings.Contains(c.Error, "query not found") {
		t.Errorf("a cycle of a deleted query: %+v", c)
	}
}
