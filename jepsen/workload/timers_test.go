package workload

import (
	"testing"

	"github.com/queen-node/queen-node/jepsen/history"
)

// Timer histories: one client per key, times in arbitrary units.

const (
	tDue   = "2026-01-01T00:00:01.000000Z"
	tAfter = "2026-01-01T00:00:01.250000Z"
	tLater = "2026-01-01T00:00:02.000000Z"
	tEarly = "2026-01-01T00:00:00.999000Z"
)

// tSched schedules txn on key; an OK answer has status st and deliverAt tDue.
func tSched(call, ret int64, st history.Status, key, txn, status string) hop {
	h := hop{client: 1, kind: timerKind, call: call, ret: ret, status: st,
		in: timerTxnIn{Timers: []timerOpIn{{Op: "schedule", Key: key, Txn: txn, DelayMs: 1000, Partition: "p0"}}}}
	if st == history.OK {
		h.out = timerTxnOut{Results: []timerResult{{OpIndex: 0, Ok: true, Status: status, TimerKey: key, Txn: sp(txn),
			MessageID: "m-" + txn, DeliverAt: tDue}}}
	}
	return h
}

// tCancel cancels key; an OK answer has status (and the txn it removed).
func tCancel(call, ret int64, st history.Status, key, status, txn string) hop {
	h := hop{client: 1, kind: timerKind, call: call, ret: ret, status: st,
		in: timerTxnIn{Timers: []timerOpIn{{Op: "cancel", Key: key}}}}
	if st == history.OK {
		r := timerResult{OpIndex: 0, Ok: status == "cancelled", Status: status, TimerKey: key}
		if txn != "" {
			r.Txn = sp(txn)
		}
		h.out = timerTxnOut{Results: []timerResult{r}}
	}
	return h
}

func withMarker(h hop, marker string) hop {
	in := h.in.(timerTxnIn)
	in.Marker = marker
	h.in = in
	return h
}

func fired(txn, createdAt string) timerFired {
	return timerFired{ID: "m-" + txn, Txn: txn, CreatedAt: createdAt, Partition: "p0"}
}

func TestTimersChecker(t *testing.T) {
	cases := []struct {
		name    string
		ops     []hop
		fired   []timerFired
		markers map[string]bool
		dead    map[string]bool
		want    want
	}{
		{name: "scheduled and fired once", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "a drain redelivery is not a second fire", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{fired("T1", tAfter), fired("T1", tAfter)}},
		{name: "the last timer on a key never fired",
			want: want{lost: 1, violations: []string{"T1 (key k) never fired"}},
			ops:  []hop{tSched(0, 10, ok, "k", "T1", "scheduled")}},
		{name: "fired twice",
			want:  want{duplicated: 1, violations: []string{"T1 (key k) fired 2 times"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{fired("T1", tAfter), fired("T1", tLater)}},
		{name: "fired early",
			want:  want{violations: []string{"T1 fired early"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{fired("T1", tEarly)}},
		{name: "fired exactly at deliverAt", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{fired("T1", tDue)}},
		{name: "fired under another message id",
			want:  want{violations: []string{"fired as message other"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{{ID: "other", Txn: "T1", CreatedAt: tAfter, Partition: "p0"}}},
		{name: "fired into another partition",
			want:  want{violations: []string{`fired into partition "p9", its schedule named "p0"`}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			fired: []timerFired{{ID: "m-T1", Txn: "T1", CreatedAt: tAfter, Partition: "p9"}}},
		{name: "rescheduled: the replaced timer never fires", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, ok, "k", "T2", "rescheduled")},
			fired: []timerFired{fired("T2", tAfter)}},
		{name: "fired after being replaced",
			want:  want{violations: []string{"timer T1 (key k) fired, but", "answered rescheduled: it replaced it"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, ok, "k", "T2", "rescheduled")},
			fired: []timerFired{fired("T1", tAfter), fired("T2", tAfter)}},
		{name: "scheduled again: the earlier one must have fired",
			want:  want{lost: 1, violations: []string{"T1 (key k) never fired", "answered scheduled"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, ok, "k", "T2", "scheduled")},
			fired: []timerFired{fired("T2", tAfter)}},
		{name: "rescheduled with nothing of ours pending",
			want:  want{violations: []string{"answered rescheduled, but no timer of ours could be pending"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "rescheduled")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "cancelled and never fired", want: want{ok: true},
			ops: []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, ok, "k", "cancelled", "T1")}},
		{name: "fired after a cancel",
			want:  want{violations: []string{"timer T1 (key k) fired, but cancel op at"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, ok, "k", "cancelled", "T1")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "a cancel that names another txn",
			want: want{violations: []string{"cancelled txn T0, but the pending one was T1"}},
			ops:  []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, ok, "k", "cancelled", "T0")}},
		{name: "absent: the timer had fired", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, ok, "k", "absent", "")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "absent, yet it never fired",
			want: want{lost: 1, violations: []string{"answered absent"}},
			ops:  []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, ok, "k", "absent", "")}},
		{name: "absent on a fresh key proves nothing", want: want{ok: true},
			ops: []hop{tCancel(0, 10, ok, "k", "absent", "")}},
		{name: "a failed schedule fired",
			want:  want{violations: []string{"timer T1 (key k) fired, but its transaction"}},
			ops:   []hop{tSched(0, 10, failed, "k", "T1", "")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "a failed schedule in between changes nothing", want: want{ok: true},
			ops: []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, failed, "k", "T2", ""),
				tSched(40, 50, ok, "k", "T3", "rescheduled")},
			fired: []timerFired{fired("T3", tAfter)}},
		{name: "an unknown schedule that never landed", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, unknown, "k", "T2", "")},
			fired: []timerFired{fired("T1", tAfter)}},
		{name: "an unknown schedule that replaced the pending one", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, unknown, "k", "T2", "")},
			fired: []timerFired{fired("T2", tLater)}},
		{name: "an unknown schedule after the pending one fired", want: want{ok: true},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, unknown, "k", "T2", "")},
			fired: []timerFired{fired("T1", tAfter), fired("T2", tLater)}},
		{name: "an unknown cancel", want: want{ok: true},
			ops: []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tCancel(20, 30, unknown, "k", "", "")}},
		{name: "an unknown schedule fired twice",
			want:  want{duplicated: 1, violations: []string{"T2 (key k) fired 2 times"}},
			ops:   []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 30, unknown, "k", "T2", "")},
			fired: []timerFired{fired("T1", tAfter), fired("T2", tAfter), fired("T2", tLater)}},
		{name: "an unknown schedule whose marker says it committed must fire",
			want:    want{lost: 1, violations: []string{"T2 (key k) never fired"}},
			ops:     []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), withMarker(tSched(20, 30, unknown, "k", "T2", ""), "m2")},
			markers: map[string]bool{"m2": true},
			fired:   []timerFired{fired("T1", tAfter)}},
		{name: "an unknown schedule whose marker says it rolled back fired",
			want:    want{violations: []string{"timer T2 (key k) fired, but its transaction"}},
			ops:     []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), withMarker(tSched(20, 30, unknown, "k", "T2", ""), "m2")},
			markers: map[string]bool{"m2": false},
			fired:   []timerFired{fired("T1", tAfter), fired("T2", tAfter)}},
		{name: "a txn nobody scheduled",
			want:  want{violations: []string{`transactionId "T9" fired, which no op of ours scheduled`}},
			fired: []timerFired{fired("T9", tAfter)}},
		{name: "a dead-lettered timer",
			want: want{violations: []string{"T1 (key k) was dead-lettered"}},
			ops:  []hop{tSched(0, 10, ok, "k", "T1", "scheduled")},
			dead: map[string]bool{"T1": true}},
		{name: "ops on a key that overlap prove less", want: want{ok: true},
			ops: []hop{tSched(0, 10, ok, "k", "T1", "scheduled"), tSched(20, 40, ok, "k", "T2", "rescheduled"),
				tSched(30, 50, ok, "k", "T3", "rescheduled")},
			fired: []timerFired{fired("T3", tAfter)}},
		{name: "a malformed answer is a violation",
			want: want{violations: []string{"malformed"}},
			ops: []hop{{client: 1, kind: timerKind, call: 0, ret: 1, status: unknown, err: timerMalformed + "1 timer results for 2 timer ops",
				in: timerTxnIn{Timers: []timerOpIn{{Op: "cancel", Key: "k"}}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			facts := timerFacts{Fired: tc.fired, Markers: tc.markers, Dead: tc.dead}
			tc.want.check(t, checkTimers(mustOps(t, tc.ops), facts))
		})
	}
}

// TestTimersCheckerManyKeys: two keys in one transaction, each judged on
// its own.
func TestTimersCheckerManyKeys(t *testing.T) {
	two := hop{client: 1, kind: timerKind, call: 0, ret: 10,
		in: timerTxnIn{Timers: []timerOpIn{{Op: "schedule", Key: "a", Txn: "A1"}, {Op: "cancel", Key: "b"}}},
		out: timerTxnOut{Results: []timerResult{
			{OpIndex: 0, Ok: true, Status: "scheduled", TimerKey: "a", Txn: sp("A1"), MessageID: "m-A1", DeliverAt: tDue},
			{OpIndex: 1, Status: "cancelled", TimerKey: "b", Txn: sp("B1")}}}}
	ops := []hop{tSched(-20, -10, ok, "b", "B1", "scheduled"), two}
	want{ok: true}.check(t, checkTimers(mustOps(t, ops), timerFacts{Fired: []timerFired{fired("A1", tAfter)}}))
	want{violations: []string{"timer B1 (key b) fired"}}.check(t, checkTimers(mustOps(t, ops),
		timerFacts{Fired: []timerFired{fired("A1", tAfter), fired("B1", tAfter)}}))
}

func TestParseTimerAnswer(t *testing.T) {
	in := timerTxnIn{Timers: []timerOpIn{{Op: "schedule", Key: "a", Txn: "A1"}, {Op: "cancel", Key: "b"}}}
	cases := []struct {
		name   string
		body   string
		ok     bool
		hasErr bool
	}{
		{name: "committed", ok: true, body: `{"success":true,"results":[
			{"index":0,"type":"kv","applied":true},
			{"index":1,"type":"timer","opIndex":0,"ok":true,"status":"scheduled","timerKey":"a","txn":"A1","messageId":"x","deliverAt":"` + tDue + `"},
			{"index":2,"type":"timer","opIndex":1,"ok":false,"status":"absent","timerKey":"b","txn":null}]}`},
		{name: "rolled back", body: `{"success":false,"reason":"kv_precondition","results":[]}`},
		{name: "a timer result missing", hasErr: true, body: `{"success":true,"results":[
			{"index":0,"type":"timer","opIndex":0,"ok":true,"status":"scheduled","timerKey":"a","txn":"A1"}]}`},
		{name: "results out of order", hasErr: true, body: `{"success":true,"results":[
			{"index":0,"type":"timer","opIndex":1,"status":"absent","timerKey":"b"},
			{"index":1,"type":"timer","opIndex":0,"status":"scheduled","timerKey":"a","txn":"A1"}]}`},
		{name: "not JSON", hasErr: true, body: `<html>`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, ok, err := parseTimerAnswer([]byte(tc.body), in)
			if (err != nil) != tc.hasErr || ok != tc.ok {
				t.Fatalf("ok=%v err=%v, want ok=%v err=%v", ok, err, tc.ok, tc.hasErr)
			}
			if ok && (len(out.Results) != 2 || out.Results[1].Status != "absent" || out.Results[0].DeliverAt != tDue) {
				t.Fatalf("results %+v", out.Results)
			}
		})
	}
}
