package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Timer routes (addendum §2) and operator switches (§4.4), over HTTP
// against a real node.

// tmResult is one timer result (POST /timers element, DELETE answer).
type tmResult struct {
	OK        bool    `json:"ok"`
	Status    string  `json:"status"`
	Queue     string  `json:"queue"`
	TimerKey  string  `json:"timerKey"`
	Txn       *string `json:"txn"`
	MessageID string  `json:"messageId"`
	DeliverAt string  `json:"deliverAt"`
}

// tmPeek is GET /timers/:queue/*timerKey (and a list row, without payload).
type tmPeek struct {
	Found     *bool   `json:"found"`
	Queue     string  `json:"queue"`
	TimerKey  string  `json:"timerKey"`
	Partition string  `json:"partition"`
	DeliverAt string  `json:"deliverAt"`
	Txn       string  `json:"txn"`
	MessageID string  `json:"messageId"`
	Payload   *string `json:"payload"`
	Attempts  int     `json:"attempts"`
	Claimed   bool    `json:"claimed"`
	CreatedAt string  `json:"createdAt"`
	UpdatedAt string  `json:"updatedAt"`
}

// tmError is the body of a refused call.
type tmError struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// tmSwitches is GET/POST /api/v1/system/kv-timers.
type tmSwitches struct {
	KVEnabled             *bool `json:"kvEnabled"`
	TimersScheduleEnabled *bool `json:"timersScheduleEnabled"`
	TimersFireEnabled     *bool `json:"timersFireEnabled"`
}

// tmB64 is the payload of a timer op: base64 of the JSON text of v, as the
// JS client sends it.
func tmB64(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// tmSchedule is a schedule op.
func tmSchedule(queue, key string, delayMs float64, txn string, payload any) map[string]any {
	return map[string]any{"op": "schedule", "queue": queue, "timerKey": key, "delayMs": delayMs, "txn": txn, "payload": tmB64(payload)}
}

func tmTime(t testing.TB, what, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return ts
}

func tmPath(queue, key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/api/v1/timers/" + url.PathEscape(queue) + "/" + strings.Join(segs, "/")
}

// post posts ops to /api/v1/timers and requires 200 with one result per op.
func (a *api) timersPost(ops ...map[string]any) []tmResult {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "POST", "/api/v1/timers", map[string]any{"operations": ops})
	var out struct {
		Results []tmResult `json:"results"`
	}
	r.decode(a.t, &out)
	if len(out.Results) != len(ops) {
		a.t.Fatalf("POST /timers with %d ops answered %d results: %s", len(ops), len(out.Results), r)
	}
	return out.Results
}

func (a *api) timerPeek(queue, key string) tmPeek {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "GET", tmPath(queue, key), nil)
	var p tmPeek
	r.decode(a.t, &p)
	if p.Found == nil {
		a.t.Fatalf("peek %s/%s: no found field: %s", queue, key, r)
	}
	return p
}

func (a *api) timerCount(queue, prefix string) int {
	a.t.Helper()
	r := a.mustStatus(http.StatusOK, "GET", "/api/v1/timers/"+url.PathEscape(queue)+"?"+qv("mode", "count", "prefix", prefix).Encode(), nil)
	var out struct {
		Count *int `json:"count"`
	}
	r.decode(a.t, &out)
	if out.Count == nil {
		a.t.Fatalf("count: %s", r)
	}
	return *out.Count
}

func (a *api) timerCancel(queue, key, txn string) tmResult {
	a.t.Helper()
	path := tmPath(queue, key)
	if txn != "" {
		path += "?txn=" + url.QueryEscape(txn)
	}
	r := a.mustStatus(http.StatusOK, "DELETE", path, nil)
	var out tmResult
	r.decode(a.t, &out)
	return out
}

// refused requires status and an error body naming code (and reason, when
// given).
func (a *api) refused(r *response, status int, code, reason string) tmError {
	a.t.Helper()
	var e tmError
	if r.Status != status {
		a.t.Errorf("got %s, want HTTP %d %s", r, status, code)
		return e
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		a.t.Errorf("HTTP %d body is not JSON: %s", r.Status, r)
		return e
	}
	if e.Error != code || (reason != "" && e.Reason != reason) {
		a.t.Errorf("got %s, want error %q reason %q", r, code, reason)
	}
	return e
}

func (a *api) switches(body any) tmSwitches {
	a.t.Helper()
	var r *response
	if body == nil {
		r = a.mustStatus(http.StatusOK, "GET", "/api/v1/system/kv-timers", nil)
	} else {
		r = a.mustStatus(http.StatusOK, "POST", "/api/v1/system/kv-timers", body)
	}
	var s tmSwitches
	r.decode(a.t, &s)
	if s.KVEnabled == nil || s.TimersScheduleEnabled == nil || s.TimersFireEnabled == nil {
		a.t.Fatalf("kv-timers: missing fields: %s", r)
	}
	return s
}

// popUntil long-polls queue (group g, batch 10) until want messages have
// arrived or timeout passes. Each is acked. It returns the messages with
// the client time each pop returned.
func (a *api) popUntil(queue, group string, want int, timeout time.Duration) ([]popMessage, []time.Time) {
	a.t.Helper()
	var msgs []popMessage
	var at []time.Time
	deadline := time.Now().Add(timeout)
	for len(msgs) < want && time.Now().Before(deadline) {
		p := a.pop("/api/v1/pop/queue/"+url.PathEscape(queue),
			qv("consumerGroup", group, "subscriptionMode", "all", "batch", "10", "wait", "true", "timeout", "1000"))
		now := time.Now()
		if p == nil {
			continue
		}
		for _, m := range p.Messages {
			msgs = append(msgs, m)
			at = append(at, now)
			g := group
			if res := a.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, ConsumerGroup: &g, LeaseID: m.LeaseID}); !res.Success {
				a.t.Fatalf("ack of %s: %s", m.TransactionID, deref(res.Error))
			}
		}
	}
	return msgs, at
}

// TestTimerRoutesOverHTTP drives every standalone timer route and the
// operator switches against a fresh node.
func TestTimerRoutesOverHTTP(t *testing.T) {
	n := startNode(t, nodeOpts{})

	t.Run("bad requests are 400 and schedule nothing", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-bad"
		good := func() map[string]any { return tmSchedule(q, "good", 60000, "txn-good", map[string]any{"x": 1}) }
		with := func(k string, v any) map[string]any {
			op := good()
			op["timerKey"] = "k-" + k
			if v == nil {
				delete(op, k)
			} else {
				op[k] = v
			}
			return op
		}
		cases := []struct {
			name         string
			body         any
			code, reason string
		}{
			{"unknown op", map[string]any{"operations": []any{with("op", "snooze")}}, "timers_bad_request", "timers_bad_op"},
			{"op missing", map[string]any{"operations": []any{with("op", nil)}}, "timers_bad_request", "timers_bad_op"},
			{"txn missing", map[string]any{"operations": []any{with("txn", nil)}}, "timers_bad_request", "timers_bad_txn"},
			{"txn empty", map[string]any{"operations": []any{with("txn", "")}}, "timers_bad_request", "timers_bad_txn"},
			{"txn not a string", map[string]any{"operations": []any{with("txn", 7)}}, "timers_bad_request", "timers_bad_txn"},
			{"delayMs missing", map[string]any{"operations": []any{with("delayMs", nil)}}, "timers_bad_request", "timers_delay_required"},
			{"delayMs a string", map[string]any{"operations": []any{with("delayMs", "1000")}}, "timers_bad_request", "timers_bad_delay"},
			{"payload bad base64", map[string]any{"operations": []any{with("payload", "not base64!!")}}, "timers_bad_request", "timers_payload_not_base64"},
			{"payload not a string", map[string]any{"operations": []any{with("payload", map[string]any{"x": 1})}}, "timers_bad_request", "timers_payload_not_base64"},
			{"payload missing", map[string]any{"operations": []any{with("payload", nil)}}, "timers_bad_request", "timers_payload_not_base64"},
			{"queue missing", map[string]any{"operations": []any{with("queue", nil)}}, "timers_bad_request", "timers_bad_queue"},
			{"timerKey empty", map[string]any{"operations": []any{with("timerKey", "")}}, "timers_bad_request", "timers_bad_key"},
			{"partition empty", map[string]any{"operations": []any{with("partition", "")}}, "timers_bad_request", "timers_bad_partition"},
			{"server-owned deliverAt", map[string]any{"operations": []any{with("deliverAt", "2030-01-01T00:00:00Z")}}, "timers_server_owned_field", ""},
			{"server-owned messageId", map[string]any{"operations": []any{with("messageId", "01a226be-20ee-7aa8-94a0-4568f73e4c45")}}, "timers_server_owned_field", ""},
			{"server-owned delaySeconds", map[string]any{"operations": []any{with("delaySeconds", 5)}}, "timers_server_owned_field", ""},
			{"server-owned _private", map[string]any{"operations": []any{with("_tenant", "other")}}, "timers_server_owned_field", ""},
			{"server-owned on a cancel", map[string]any{"operations": []any{map[string]any{"op": "cancel", "queue": q, "timerKey": "good", "attempts": 0}}}, "timers_server_owned_field", ""},
			{"duplicate (queue, timerKey)", map[string]any{"operations": []any{good(), tmSchedule(q, "good", 5, "txn-2", 1)}}, "timers_bad_request", "timers_bad_request"},
			{"duplicate key across ops kinds", map[string]any{"operations": []any{good(), map[string]any{"op": "cancel", "queue": q, "timerKey": "good"}}}, "timers_bad_request", "timers_bad_request"},
			{"operations not an array", map[string]any{"operations": "schedule"}, "timers_bad_request", ""},
			{"operations empty", map[string]any{"operations": []any{}}, "timers_bad_request", ""},
			{"op not an object", map[string]any{"operations": []any{"schedule"}}, "timers_bad_request", "timers_bad_op"},
			// One bad op rejects the whole call: the good op before it is
			// not scheduled either (checked below).
			{"good op then a bad one", map[string]any{"operations": []any{good(), with("op", "later")}}, "timers_bad_request", "timers_bad_op"},
		}
		for _, c := range cases {
			r := a.must("POST", "/api/v1/timers", c.body)
			if r.Status != http.StatusBadRequest {
				t.Errorf("%s: got %s, want 400", c.name, r)
				continue
			}
			var e tmError
			r.decode(t, &e)
			if e.Error != c.code || (c.reason != "" && e.Reason != c.reason) {
				t.Errorf("%s: got %s, want error %q reason %q", c.name, r, c.code, c.reason)
			}
		}
		var many []any
		for i := 0; i < 257; i++ {
			many = append(many, tmSchedule(q, fmt.Sprintf("k-many-%03d", i), 60000, "t", i))
		}
		a.refused(a.must("POST", "/api/v1/timers", map[string]any{"operations": many}), http.StatusBadRequest, "timers_bad_request", "timers_too_many_ops")
		if r := a.must("POST", "/api/v1/timers", `{"operations":[`); r.Status != http.StatusBadRequest {
			t.Errorf("malformed JSON: got %s, want 400", r)
		}
		if p := a.timerPeek(q, "good"); *p.Found {
			t.Errorf("after only refused calls, the timer %s/good is pending: %+v", q, p)
		}
		if c := a.timerCount(q, "k-"); c != 0 {
			t.Errorf("after only refused calls, %d timers are pending under k-", c)
		}
		if c := a.timerCount(q, "good"); c != 0 {
			t.Errorf("after only refused calls, %d timers are pending under good", c)
		}

		// A bare array is accepted too ([S1]; ours: both forms).
		r := a.mustStatus(http.StatusOK, "POST", "/api/v1/timers", []any{good()})
		var out struct {
			Results []tmResult `json:"results"`
		}
		r.decode(t, &out)
		if len(out.Results) != 1 || out.Results[0].Status != "scheduled" {
			t.Errorf("bare array: %s, want one scheduled result", r)
		}
		if res := a.timerCancel(q, "good", ""); res.Status != "cancelled" {
			t.Errorf("cancel after the bare-array schedule: %+v", res)
		}
	})

	t.Run("count and list parameters", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-list"
		base := "/api/v1/timers/" + q
		for _, c := range []struct {
			query, reason string
		}{
			{"mode=count", "timers_count_prefix_required"},
			{"mode=count&prefix=", "timers_count_prefix_required"},
			{"mode=count&prefix=a&after=a", "timers_count_page_parameters"},
			{"mode=count&prefix=a&limit=10", "timers_count_page_parameters"},
			{"mode=count&prefix=" + strings.Repeat("p", 129), "timers_count_prefix_too_long"},
			{"mode=count&prefix=a%00b", "timers_count_prefix_invalid"},
			{"mode=sum&prefix=a", "timers_read_mode_unknown"},
		} {
			r := a.must("GET", base+"?"+c.query, nil)
			if r.Status != http.StatusBadRequest {
				t.Errorf("GET ?%.40s: got %s, want 400 %s", c.query, r, c.reason)
				continue
			}
			var e tmError
			r.decode(t, &e)
			if e.Reason != c.reason {
				t.Errorf("GET ?%.40s: got %s, want reason %s", c.query, r, c.reason)
			}
		}
		if c := a.timerCount(q, strings.Repeat("p", 128)); c != 0 {
			t.Errorf("count with a 128-byte prefix: %d, want 0", c)
		}

		// Five timers, keys out of order, one with slashes in its key.
		keys := []string{"order/3", "order/1", "other", "order/2", "order/10"}
		var ops []map[string]any
		for i, k := range keys {
			ops = append(ops, tmSchedule(q, k, 3600e3, fmt.Sprintf("txn-%d", i), map[string]any{"i": i}))
		}
		for i, res := range a.timersPost(ops...) {
			if !res.OK || res.Status != "scheduled" || res.TimerKey != keys[i] {
				t.Errorf("schedule %s: %+v", keys[i], res)
			}
		}
		if c := a.timerCount(q, "order/"); c != 4 {
			t.Errorf("count prefix order/: %d, want 4", c)
		}
		if c := a.timerCount(q, "order/1"); c != 2 {
			t.Errorf("count prefix order/1 (order/1 and order/10): %d, want 2", c)
		}
		if c := a.timerCount(q, "o*"); c != 0 {
			t.Errorf("count prefix o* (literal, no wildcard): %d, want 0", c)
		}
		if c := a.timerCount("tm-list-other", "order/"); c != 0 {
			t.Errorf("count on another queue: %d, want 0", c)
		}
		p := a.timerPeek(q, "order/10")
		if !*p.Found || p.TimerKey != "order/10" || p.Txn != "txn-4" || p.Partition != "Default" || p.Claimed || p.Attempts != 0 {
			t.Errorf("peek order/10 (a key with a slash): %+v", p)
		}

		// Pages of two, in byte order of the key.
		var got []string
		after := ""
		for page := 0; page < 5; page++ {
			qs := qv("limit", "2")
			if after != "" {
				qs.Set("after", after)
			}
			r := a.mustStatus(http.StatusOK, "GET", base+"?"+qs.Encode(), nil)
			var out struct {
				Rows      []map[string]json.RawMessage `json:"rows"`
				Truncated bool                         `json:"truncated"`
				NextAfter *string                      `json:"nextAfter"`
			}
			r.decode(t, &out)
			for _, row := range out.Rows {
				var k string
				_ = json.Unmarshal(row["timerKey"], &k)
				got = append(got, k)
				if _, has := row["payload"]; has {
					t.Errorf("list row %s carries the payload", k)
				}
			}
			if !out.Truncated {
				if out.NextAfter != nil {
					t.Errorf("last page with nextAfter %q", *out.NextAfter)
				}
				break
			}
			if out.NextAfter == nil || len(out.Rows) != 2 {
				t.Fatalf("truncated page without nextAfter or with %d rows: %s", len(out.Rows), r)
			}
			after = *out.NextAfter
		}
		want := []string{"order/1", "order/10", "order/2", "order/3", "other"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("paged list: %v, want %v", got, want)
		}
		r := a.mustStatus(http.StatusOK, "GET", base, nil)
		var all struct {
			Rows      []tmPeek `json:"rows"`
			Truncated bool     `json:"truncated"`
		}
		r.decode(t, &all)
		if len(all.Rows) != 5 || all.Truncated {
			t.Errorf("default list: %d rows, truncated %v; want 5, false", len(all.Rows), all.Truncated)
		}
		r = a.mustStatus(http.StatusOK, "GET", "/api/v1/timers/tm-list-none", nil)
		if !jsonEq(r.Body, []byte(`{"rows":[],"truncated":false,"nextAfter":null}`)) {
			t.Errorf("list of a queue without timers: %s", r)
		}
		for _, k := range keys {
			if res := a.timerCancel(q, k, ""); res.Status != "cancelled" || !res.OK {
				t.Errorf("cancel %s: %+v", k, res)
			}
		}
	})

	t.Run("horizon and payload limits", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-limits"
		const day = 24 * 3600 * 1000.0
		r := a.must("POST", "/api/v1/timers", map[string]any{"operations": []any{tmSchedule(q, "far", 90*day+1, "t", 1)}})
		a.refused(r, http.StatusForbidden, "timer_horizon_exceeded", "")
		if res := a.timersPost(tmSchedule(q, "edge", 90*day, "t", 1)); res[0].Status != "scheduled" {
			t.Errorf("delayMs of exactly 90 days: %+v, want scheduled", res[0])
		}
		// The transaction array has no horizon (addendum §1.2).
		r = a.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", map[string]any{
			"timers": []any{tmSchedule(q, "far-in-txn", 120*day, "t", 1)},
		})
		var v struct {
			Success bool       `json:"success"`
			Results []tmResult `json:"results"`
		}
		r.decode(t, &v)
		if !v.Success || len(v.Results) != 1 || v.Results[0].Status != "scheduled" {
			t.Errorf("120-day timer in a transaction: %s, want committed and scheduled", r)
		}

		// Decoded payload: 1 MiB is the ceiling (a JSON string of exactly
		// 1 MiB, quotes included), one byte more is a 413.
		atLimit := base64.StdEncoding.EncodeToString([]byte(`"` + strings.Repeat("a", 1<<20-2) + `"`))
		over := base64.StdEncoding.EncodeToString([]byte(`"` + strings.Repeat("a", 1<<20-1) + `"`))
		r = a.must("POST", "/api/v1/timers", map[string]any{"operations": []any{
			map[string]any{"op": "schedule", "queue": q, "timerKey": "big", "delayMs": 3600e3, "txn": "t", "payload": over},
		}})
		a.refused(r, http.StatusRequestEntityTooLarge, "payload_too_large", "")
		if p := a.timerPeek(q, "big"); *p.Found {
			t.Errorf("the 413 scheduled the timer: %+v", p)
		}
		res := a.timersPost(map[string]any{"op": "schedule", "queue": q, "timerKey": "big", "delayMs": 3600e3, "txn": "t", "payload": atLimit})
		if res[0].Status != "scheduled" {
			t.Errorf("1 MiB payload: %+v, want scheduled", res[0])
		}
		for _, k := range []string{"edge", "far-in-txn", "big"} {
			if res := a.timerCancel(q, k, ""); res.Status != "cancelled" {
				t.Errorf("cancel %s: %+v", k, res)
			}
		}
	})

	t.Run("peek and cancel of an absent timer", func(t *testing.T) {
		a := n.api(t)
		r := a.mustStatus(http.StatusOK, "GET", tmPath("tm-absent", "nobody/here"), nil)
		if !jsonEq(r.Body, []byte(`{"found":false}`)) {
			t.Errorf("peek of an absent timer: %s, want {\"found\":false}", r)
		}
		res := a.timerCancel("tm-absent", "nobody/here", "")
		if res.OK || res.Status != "absent" || res.Txn != nil || res.Queue != "tm-absent" || res.TimerKey != "nobody/here" {
			t.Errorf("cancel of an absent timer: %+v, want ok:false status absent txn null", res)
		}
		if res.MessageID != "" || res.DeliverAt != "" {
			t.Errorf("cancel of an absent timer carries messageId/deliverAt: %+v", res)
		}
		res = a.timerCancel("tm-absent", "nobody/here", "caller-txn")
		if res.OK || res.Status != "absent" || deref(res.Txn) != "caller-txn" {
			t.Errorf("cancel of an absent timer with ?txn=: %+v, want the caller's txn echoed", res)
		}
		// The same through POST /timers: a value, not an error.
		got := a.timersPost(map[string]any{"op": "cancel", "queue": "tm-absent", "timerKey": "k", "txn": "x"})[0]
		if got.OK || got.Status != "absent" || deref(got.Txn) != "x" {
			t.Errorf("POST cancel of an absent timer: %+v", got)
		}
	})

	t.Run("a schedule fires into the queue, not before deliverAt", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-fire"
		data := map[string]any{"order": 42.0, "note": "héllo", "items": []any{"a", "b"}, "nested": map[string]any{"ok": true}}
		before := time.Now()
		res := a.timersPost(map[string]any{
			"op": "schedule", "queue": q, "timerKey": "order/42", "partition": "eu-west",
			"delayMs": 800.5, "txn": "fire-txn-42", "payload": tmB64(data),
		})[0]
		if !res.OK || res.Status != "scheduled" || deref(res.Txn) != "fire-txn-42" || res.Queue != q || res.TimerKey != "order/42" {
			t.Fatalf("schedule: %+v", res)
		}
		requireUUID(t, "messageId", res.MessageID)
		deliverAt := tmTime(t, "deliverAt", res.DeliverAt)
		if d := deliverAt.Sub(before); d < 700*time.Millisecond || d > 5*time.Second {
			t.Errorf("deliverAt %v is %v after the call started; want about 800 ms", deliverAt, d)
		}
		// The schedule does not create the queue.
		if raw := a.queueDetail(q); raw != nil {
			t.Errorf("the schedule created queue %s: %s", q, raw)
		}
		p := a.timerPeek(q, "order/42")
		if !*p.Found || p.Txn != "fire-txn-42" || p.MessageID != res.MessageID || p.DeliverAt != res.DeliverAt || p.Partition != "eu-west" {
			t.Errorf("peek: %+v, want the scheduled timer", p)
		}
		if p.Payload == nil || *p.Payload != tmB64(data) {
			t.Errorf("peek payload %v, want the base64 that was sent", p.Payload)
		}
		// The due time is the leader's planning time plus delayMs, kept to
		// the microsecond (fractions allowed).
		if d := deliverAt.Sub(tmTime(t, "createdAt", p.CreatedAt)); d != 800500*time.Microsecond {
			t.Errorf("deliverAt - createdAt = %v, want delayMs 800.5 exactly", d)
		}

		msgs, at := a.popUntil(q, "g", 1, 10*time.Second)
		if len(msgs) != 1 {
			t.Fatalf("%d messages fired within 10 s, want 1", len(msgs))
		}
		m := msgs[0]
		if m.ID != res.MessageID || m.TransactionID != "fire-txn-42" || m.Partition != "eu-west" || m.Queue != q {
			t.Errorf("fired message id %s txn %q partition %q queue %q; want %s fire-txn-42 eu-west %s", m.ID, m.TransactionID, m.Partition, m.Queue, res.MessageID, q)
		}
		want, _ := json.Marshal(data)
		if !jsonEq(m.Data, want) {
			t.Errorf("fired data %s, want the decoded JSON %s", m.Data, want)
		}
		if m.TraceID != nil {
			t.Errorf("fired message has traceId %q; a fired message carries none", *m.TraceID)
		}
		if created := tmTime(t, "createdAt", m.CreatedAt); created.Before(deliverAt) {
			t.Errorf("fired message createdAt %v is before its deliverAt %v", created, deliverAt)
		}
		if at[0].Before(deliverAt) {
			t.Errorf("the pop returned the message at %v, before its deliverAt %v", at[0], deliverAt)
		}
		t.Logf("fired: appended %v after deliverAt, popped %v after", tmTime(t, "createdAt", m.CreatedAt).Sub(deliverAt), at[0].Sub(deliverAt))
		if p := a.timerPeek(q, "order/42"); *p.Found {
			t.Errorf("after the fire the timer is still pending: %+v", p)
		}
		if c := a.timerCount(q, "order/"); c != 0 {
			t.Errorf("after the fire: count %d, want 0", c)
		}
		if res := a.timerCancel(q, "order/42", ""); res.Status != "absent" {
			t.Errorf("cancel after the fire: %+v, want absent", res)
		}
		if tot := a.queueTotals(q); tot["total"] != 1 {
			t.Errorf("queue totals after one fire: %v", tot)
		}
	})

	t.Run("a fire whose txn is already in the partition is absorbed by dedup", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-dedup"
		a.pushOne(pushItem{Queue: q, TransactionID: "already-there", Payload: map[string]any{"original": true}}, "queued")
		res := a.timersPost(tmSchedule(q, "d", 100, "already-there", map[string]any{"original": false}),
			tmSchedule(q, "e", 100, "not-yet", map[string]any{"second": true}))
		msgs, _ := a.popUntil(q, "g", 2, 10*time.Second)
		if len(msgs) != 2 || msgs[0].TransactionID != "already-there" || !jsonEq(msgs[0].Data, []byte(`{"original":true}`)) ||
			msgs[1].TransactionID != "not-yet" || msgs[1].ID != res[1].MessageID {
			t.Fatalf("messages %+v; want the original push, then the second timer's message", msgs)
		}
		if p := a.timerPeek(q, "d"); *p.Found {
			t.Errorf("the absorbed timer is still pending: %+v", p)
		}
		if tot := a.queueTotals(q); tot["total"] != 2 {
			t.Errorf("queue totals %v, want 2 (the absorbed fire appends nothing)", tot)
		}
	})

	t.Run("timers in a transaction", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-txn"
		r := a.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", map[string]any{
			"operations": []any{map[string]any{"type": "push", "items": []any{
				map[string]any{"queue": q + "-side", "transactionId": "s1", "payload": 1},
				map[string]any{"queue": q + "-side", "transactionId": "s2", "payload": 2},
			}}},
			"kv": []any{map[string]any{"op": "put", "ns": "tm-txn", "key": "k", "value": 1, "forever": true}},
			"timers": []any{
				tmSchedule(q, "a", 60000, "ta", map[string]any{"a": 1}),
				map[string]any{"op": "cancel", "queue": q, "timerKey": "never", "txn": "echo-me"},
			},
		})
		var v struct {
			Success bool `json:"success"`
			Results []struct {
				tmResult
				Index   int    `json:"index"`
				Type    string `json:"type"`
				OpIndex *int   `json:"opIndex"`
			} `json:"results"`
		}
		r.decode(t, &v)
		var types []string
		for i, res := range v.Results {
			types = append(types, res.Type)
			if res.Index != i {
				t.Errorf("result %d has index %d", i, res.Index)
			}
		}
		if !v.Success || strings.Join(types, ",") != "push,push,kv,timer,timer" {
			t.Fatalf("transaction: %s; want success with results push, push, kv, timer, timer", r)
		}
		t0, t1 := v.Results[3], v.Results[4]
		if t0.OpIndex == nil || *t0.OpIndex != 0 || !t0.OK || t0.Status != "scheduled" || t0.MessageID == "" || t0.DeliverAt == "" || deref(t0.Txn) != "ta" {
			t.Errorf("timer result 0: %+v", t0)
		}
		if t1.OpIndex == nil || *t1.OpIndex != 1 || t1.OK || t1.Status != "absent" || deref(t1.Txn) != "echo-me" || t1.MessageID != "" || t1.DeliverAt != "" {
			t.Errorf("timer result 1: %+v", t1)
		}
		// A rolled-back transaction cancels nothing and schedules nothing.
		r = a.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", map[string]any{
			"kv": []any{map[string]any{"op": "putIfAbsent", "ns": "tm-txn", "key": "k", "value": 2, "forever": true, "required": true}},
			"timers": []any{
				map[string]any{"op": "cancel", "queue": q, "timerKey": "a"},
				tmSchedule(q, "b", 60000, "tb", 1),
			},
		})
		var rb txnVerdict
		r.decode(t, &rb)
		if rb.Success || rb.Reason != "kv_precondition" {
			t.Errorf("gate lost: %s, want success:false kv_precondition", r)
		}
		if p := a.timerPeek(q, "a"); !*p.Found || p.Txn != "ta" {
			t.Errorf("the rolled-back cancel removed the timer: %+v", p)
		}
		if p := a.timerPeek(q, "b"); *p.Found {
			t.Errorf("the rolled-back schedule is pending: %+v", p)
		}
		// Shape errors.
		for _, body := range []string{
			`{"timers":null}`,
			`{"timers":{"op":"cancel"}}`,
			`{"operations":[{"type":"timer","op":"cancel","queue":"q","timerKey":"k"}]}`,
			`{"timers":[{"op":"schedule","queue":"q","timerKey":"k","delayMs":1,"txn":"t","payload":"!!"}]}`,
		} {
			if r := a.must("POST", "/api/v1/transaction", body); r.Status != http.StatusBadRequest {
				t.Errorf("transaction %s: got %s, want 400", body, r)
			}
		}
		a.timerCancel(q, "a", "")
	})

	t.Run("a long-poll pop wakes on a fire", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-wake"
		a.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 30}})
		res := a.timersPost(tmSchedule(q, "w", 700, "wake-1", map[string]any{"w": 1}))[0]
		deliverAt := tmTime(t, "deliverAt", res.DeliverAt)
		p := a.pop("/api/v1/pop/queue/"+q, qv("consumerGroup", "g", "subscriptionMode", "all", "wait", "true", "timeout", "10000"))
		got := time.Now()
		if p == nil || len(p.Messages) != 1 || p.Messages[0].TransactionID != "wake-1" {
			t.Fatalf("a 10 s long-poll pop parked before the fire: %+v", p)
		}
		if got.Before(deliverAt) {
			t.Errorf("popped at %v, before deliverAt %v", got, deliverAt)
		}
		if late := got.Sub(deliverAt); late > 2*time.Second {
			t.Errorf("the parked pop returned %v after deliverAt; it should wake on the fire", late)
		}
	})

	t.Run("reschedule replaces the pending timer", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-resched"
		first := a.timersPost(tmSchedule(q, "r", 60000, "txn-first", map[string]any{"v": "first"}))[0]
		if first.Status != "scheduled" {
			t.Fatalf("first schedule: %+v", first)
		}
		p1 := a.timerPeek(q, "r")
		time.Sleep(5 * time.Millisecond)
		second := a.timersPost(map[string]any{"op": "reschedule", "queue": q, "timerKey": "r", "delayMs": 600,
			"txn": "txn-second", "payload": tmB64(map[string]any{"v": "second"}), "partition": "p2"})[0]
		if !second.OK || second.Status != "rescheduled" || deref(second.Txn) != "txn-second" {
			t.Fatalf("reschedule: %+v, want rescheduled", second)
		}
		if second.MessageID == first.MessageID {
			t.Errorf("the reschedule kept the messageId %s; a new one is minted", first.MessageID)
		}
		if !tmTime(t, "deliverAt", second.DeliverAt).Before(tmTime(t, "deliverAt", first.DeliverAt)) {
			t.Errorf("the reschedule's deliverAt %s is not before the first %s", second.DeliverAt, first.DeliverAt)
		}
		p2 := a.timerPeek(q, "r")
		if p2.Txn != "txn-second" || p2.MessageID != second.MessageID || p2.DeliverAt != second.DeliverAt || p2.Partition != "p2" {
			t.Errorf("peek after reschedule: %+v", p2)
		}
		if p2.CreatedAt != p1.CreatedAt || p2.UpdatedAt == p1.UpdatedAt {
			t.Errorf("reschedule: createdAt %s -> %s, updatedAt %s -> %s; want createdAt kept, updatedAt new", p1.CreatedAt, p2.CreatedAt, p1.UpdatedAt, p2.UpdatedAt)
		}
		if c := a.timerCount(q, "r"); c != 1 {
			t.Errorf("count after reschedule: %d, want 1", c)
		}
		// "reschedule" of an absent key is a plain schedule, and
		// "schedule" of a pending key reports rescheduled.
		if r := a.timersPost(map[string]any{"op": "reschedule", "queue": q, "timerKey": "fresh", "delayMs": 60000, "txn": "f", "payload": tmB64(1)})[0]; r.Status != "scheduled" {
			t.Errorf("reschedule of an absent key: %+v, want scheduled", r)
		}
		if r := a.timersPost(tmSchedule(q, "fresh", 60000, "f2", 2))[0]; r.Status != "rescheduled" {
			t.Errorf("schedule of a pending key: %+v, want rescheduled", r)
		}
		if r := a.timerCancel(q, "fresh", ""); r.Status != "cancelled" || deref(r.Txn) != "f2" {
			t.Errorf("cancel of fresh: %+v, want cancelled with the stored txn f2", r)
		}

		msgs, _ := a.popUntil(q, "g", 1, 10*time.Second)
		if len(msgs) != 1 || msgs[0].TransactionID != "txn-second" || msgs[0].ID != second.MessageID || msgs[0].Partition != "p2" {
			t.Fatalf("fired: %+v, want exactly the rescheduled message", msgs)
		}
		if !jsonEq(msgs[0].Data, []byte(`{"v":"second"}`)) {
			t.Errorf("fired data %s, want the rescheduled payload", msgs[0].Data)
		}
		// Nothing else: the first schedule is gone.
		if more, _ := a.popUntil(q, "g", 1, 1500*time.Millisecond); len(more) != 0 {
			t.Errorf("a second message fired after the reschedule: %+v", more)
		}
		if tot := a.queueTotals(q); tot["total"] != 1 {
			t.Errorf("queue totals: %v, want one message", tot)
		}
	})

	t.Run("a cancelled timer never fires", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-cancel"
		a.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q})
		res := a.timersPost(tmSchedule(q, "via-post", 500, "t-post", 1), tmSchedule(q, "via/delete", 500, "t-del", 2))
		if res[0].Status != "scheduled" || res[1].Status != "scheduled" {
			t.Fatalf("schedules: %+v", res)
		}
		c := a.timersPost(map[string]any{"op": "cancel", "queue": q, "timerKey": "via-post"})[0]
		if !c.OK || c.Status != "cancelled" || deref(c.Txn) != "t-post" || c.MessageID != "" {
			t.Errorf("POST cancel: %+v, want ok cancelled with the stored txn", c)
		}
		d := a.timerCancel(q, "via/delete", "ignored")
		if !d.OK || d.Status != "cancelled" || deref(d.Txn) != "t-del" {
			t.Errorf("DELETE cancel: %+v, want ok cancelled with the stored txn t-del", d)
		}
		time.Sleep(time.Until(tmTime(t, "deliverAt", res[1].DeliverAt)) + 300*time.Millisecond)
		if msgs, _ := a.popUntil(q, "g", 1, 1000*time.Millisecond); len(msgs) != 0 {
			t.Errorf("a cancelled timer fired: %+v", msgs)
		}
	})

	t.Run("timersSchedule off: schedules 503, cancels still work", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-sched-off"
		defer a.switches(map[string]any{"timersSchedule": true})
		pre := a.timersPost(tmSchedule(q, "keep", 60000, "keep", 1), tmSchedule(q, "drop", 60000, "drop", 2),
			tmSchedule(q, "drop/2", 60000, "drop2", 3), tmSchedule(q, "fires-anyway", 700, "fires-anyway", 4))
		for _, r := range pre {
			if r.Status != "scheduled" {
				t.Fatalf("schedule before the switch: %+v", r)
			}
		}
		s := a.switches(map[string]any{"timersSchedule": false})
		if *s.TimersScheduleEnabled || !*s.TimersFireEnabled || !*s.KVEnabled {
			t.Errorf("after timersSchedule:false: %+v", s)
		}
		if g := a.switches(nil); *g.TimersScheduleEnabled {
			t.Errorf("GET after timersSchedule:false: schedule still enabled")
		}

		r := a.must("POST", "/api/v1/timers", map[string]any{"operations": []any{tmSchedule(q, "new", 1000, "n", 1)}})
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("schedule while paused: %s (Retry-After %q), want 503 with Retry-After", r, r.Header.Get("Retry-After"))
		}
		r = a.must("POST", "/api/v1/timers", map[string]any{"operations": []any{
			map[string]any{"op": "reschedule", "queue": q, "timerKey": "keep", "delayMs": 1, "txn": "k2", "payload": tmB64(1)}}})
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("reschedule while paused: %s, want 503", r)
		}
		// A call mixing a schedule and a cancel is refused whole.
		r = a.must("POST", "/api/v1/timers", map[string]any{"operations": []any{
			map[string]any{"op": "cancel", "queue": q, "timerKey": "drop"}, tmSchedule(q, "new", 1000, "n", 1)}})
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("schedule + cancel while paused: %s, want 503", r)
		}
		if p := a.timerPeek(q, "drop"); !*p.Found {
			t.Errorf("the refused mixed call cancelled drop")
		}
		if p := a.timerPeek(q, "new"); *p.Found {
			t.Errorf("a schedule got through while paused: %+v", p)
		}
		if p := a.timerPeek(q, "keep"); p.Txn != "keep" {
			t.Errorf("a reschedule got through while paused: %+v", p)
		}
		// Inside a transaction, a schedule is refused and nothing commits.
		r = a.must("POST", "/api/v1/transaction", map[string]any{
			"operations": []any{map[string]any{"type": "push", "items": []any{map[string]any{"queue": q + "-side", "transactionId": "side-1", "payload": 1}}}},
			"timers":     []any{tmSchedule(q, "in-txn", 1000, "x", 1)},
		})
		var v struct {
			Success bool `json:"success"`
		}
		_ = json.Unmarshal(r.Body, &v)
		if r.Status == http.StatusOK && v.Success {
			t.Errorf("a transaction scheduled while paused: %s", r)
		}
		if p := a.timerPeek(q, "in-txn"); *p.Found {
			t.Errorf("the refused transaction scheduled its timer")
		}
		if raw := a.queueDetail(q + "-side"); raw != nil {
			t.Errorf("the refused transaction pushed its message: %s", raw)
		}

		// Cancels: POST with only cancels, and DELETE.
		c := a.timersPost(map[string]any{"op": "cancel", "queue": q, "timerKey": "drop"})[0]
		if c.Status != "cancelled" {
			t.Errorf("POST cancel while paused: %+v, want cancelled", c)
		}
		if d := a.timerCancel(q, "drop/2", ""); d.Status != "cancelled" {
			t.Errorf("DELETE while paused: %+v, want cancelled", d)
		}
		// Cancel in a transaction is allowed too.
		r = a.mustStatus(http.StatusOK, "POST", "/api/v1/transaction", map[string]any{
			"timers": []any{map[string]any{"op": "cancel", "queue": q, "timerKey": "keep"}},
		})
		var tv struct {
			Success bool       `json:"success"`
			Results []tmResult `json:"results"`
		}
		r.decode(t, &tv)
		if !tv.Success || len(tv.Results) != 1 || tv.Results[0].Status != "cancelled" {
			t.Errorf("transaction cancel while paused: %s", r)
		}
		// Fires continue while scheduling is paused.
		if msgs, _ := a.popUntil(q, "g", 1, 10*time.Second); len(msgs) != 1 || msgs[0].TransactionID != "fires-anyway" {
			t.Errorf("while scheduling is paused, the due timer fired %+v; want fires-anyway", msgs)
		}

		s = a.switches(map[string]any{"timersSchedule": true})
		if !*s.TimersScheduleEnabled {
			t.Errorf("after timersSchedule:true: %+v", s)
		}
		if res := a.timersPost(tmSchedule(q, "new", 60000, "n", 1))[0]; res.Status != "scheduled" {
			t.Errorf("schedule after resuming: %+v", res)
		}
		a.timerCancel(q, "new", "")

		// The switch route's own 400s.
		if r := a.must("POST", "/api/v1/system/kv-timers", map[string]any{}); r.Status != http.StatusBadRequest {
			t.Errorf("POST kv-timers with no field: %s, want 400", r)
		}
		if r := a.must("POST", "/api/v1/system/kv-timers", map[string]any{"timersFire": "off"}); r.Status != http.StatusBadRequest {
			t.Errorf("POST kv-timers with a non-boolean: %s, want 400", r)
		}
	})

	t.Run("timersFire off: nothing fires, then the backlog fires oldest first", func(t *testing.T) {
		a := n.api(t)
		const q = "tm-fire-off"
		defer a.switches(map[string]any{"timersFire": true})
		a.mustStatus(http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": q})
		s := a.switches(map[string]any{"timersFire": false})
		if *s.TimersFireEnabled || !*s.TimersScheduleEnabled {
			t.Fatalf("after timersFire:false: %+v", s)
		}
		// Schedule order b, a, c; key order a, b, c; due order c, a, b.
		res := a.timersPost(
			tmSchedule(q, "k-b", 900, "txn-b", map[string]any{"k": "b"}),
			tmSchedule(q, "k-a", 600, "txn-a", map[string]any{"k": "a"}),
			tmSchedule(q, "k-c", 300, "txn-c", map[string]any{"k": "c"}),
		)
		last := tmTime(t, "deliverAt", res[0].DeliverAt)
		time.Sleep(time.Until(last) + 700*time.Millisecond)
		if msgs, _ := a.popUntil(q, "g", 1, 600*time.Millisecond); len(msgs) != 0 {
			t.Errorf("with timersFire off, %d messages fired: %+v", len(msgs), msgs)
		}
		if c := a.timerCount(q, "k-"); c != 3 {
			t.Errorf("with timersFire off and all three due: %d pending, want 3", c)
		}
		if g := a.switches(nil); *g.TimersFireEnabled {
			t.Errorf("GET: timersFireEnabled true while off")
		}

		a.switches(map[string]any{"timersFire": true})
		msgs, _ := a.popUntil(q, "g", 3, 10*time.Second)
		var order []string
		for _, m := range msgs {
			order = append(order, m.TransactionID)
		}
		if strings.Join(order, ",") != "txn-c,txn-a,txn-b" {
			t.Errorf("backlog fired in order %v, want oldest due first: txn-c, txn-a, txn-b", order)
		}
		for i := 1; i < len(msgs); i++ {
			if tmTime(t, "createdAt", msgs[i].CreatedAt).Before(tmTime(t, "createdAt", msgs[i-1].CreatedAt)) {
				t.Errorf("createdAt goes backwards: %s then %s", msgs[i-1].CreatedAt, msgs[i].CreatedAt)
			}
		}
		if c := a.timerCount(q, "k-"); c != 0 {
			t.Errorf("after the backlog fired: %d pending", c)
		}
	})
	n.requireRunning()
}
