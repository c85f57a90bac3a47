package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestCheckCommit(t *testing.T) {
	ok := `{"results":[{"index":0,"type":"ack","success":true},{"index":1,"type":"kv","applied":true,"success":true}],"success":true}`
	lost := `{"success":false,"reason":"kv_precondition","failedIndex":1,"kvReason":"exists","results":[]}`
	fenced := `{"success":false,"reason":"rejected_ack","error":"lease","results":[]}`
	notApplied := `{"results":[{"type":"ack","success":true},{"type":"kv","applied":false}],"success":true}`
	ackOnly := `{"results":[{"type":"ack","success":true}],"success":true}`
	cases := []struct {
		name   string
		status int
		body   string
		kv     int
		kind   string // "" = good
	}{
		{"committed", 200, ok, 1, ""},
		{"ack only", 200, ackOnly, 0, ""},
		{"marker lost", 200, lost, 1, "commit rolled back: kv_precondition"},
		{"lease lost", 200, fenced, 1, "commit rolled back: rejected_ack"},
		{"kv not applied", 200, notApplied, 1, "commit kv result"},
		{"short results", 200, ackOnly, 1, "commit result count"},
		{"server error", 503, `{"error":"x","code":"no_leader"}`, 1, "commit HTTP 503"},
		{"not JSON", 200, `oops`, 1, "commit bad body"},
	}
	for _, c := range cases {
		v := checkCommit(c.status, []byte(c.body), c.kv)
		if c.kind == "" && (v.good != 1 || v.bad != 0) || c.kind != "" && (v.bad != 1 || v.kind != c.kind) {
			t.Errorf("%s: got %+v, want kind %q", c.name, v, c.kind)
		}
	}
}

func TestCheckMarkerGet(t *testing.T) {
	if found, v := checkMarkerGet(200, []byte(`{"ok":true,"results":[{"found":false,"key":"k"}]}`)); found || v.bad != 0 {
		t.Errorf("absent: %v %+v", found, v)
	}
	if found, v := checkMarkerGet(200, []byte(`{"results":[{"found":true,"key":"k","value":true,"version":3}]}`)); !found || v.bad != 0 {
		t.Errorf("present: %v %+v", found, v)
	}
	if _, v := checkMarkerGet(429, []byte(`{"error":"rate"}`)); v.kind != "kv get HTTP 429" {
		t.Errorf("429: %+v", v)
	}
	if _, v := checkMarkerGet(200, []byte(`{"results":[]}`)); v.bad != 1 {
		t.Errorf("no result: %+v", v)
	}
}

func TestCheckPopOne(t *testing.T) {
	one := `{"success":true,"messages":[{"transactionId":"t","partitionId":"p","leaseId":"l","createdAt":"2026-01-01T00:00:00.000001Z"}]}`
	m, v := checkPopOne(200, []byte(one))
	if m == nil || m.TransactionID != "t" || v.bad != 0 {
		t.Errorf("one: %+v %+v", m, v)
	}
	if m, v := checkPopOne(200, []byte(`{"success":true,"messages":[]}`)); m != nil || v.bad != 0 {
		t.Errorf("empty: %+v %+v", m, v)
	}
	two := `{"messages":[{"transactionId":"a","partitionId":"p","leaseId":"l"},{"transactionId":"b","partitionId":"p","leaseId":"l"}]}`
	if _, v := checkPopOne(200, []byte(two)); v.bad != 1 {
		t.Errorf("two: %+v", v)
	}
	if _, v := checkPopOne(200, []byte(`{"messages":[{"transactionId":"a"}]}`)); v.kind != "pop message incomplete" {
		t.Errorf("incomplete: %+v", v)
	}
}

func TestCheckTimers(t *testing.T) {
	body := `{"results":[
		{"ok":true,"status":"scheduled","queue":"q","timerKey":"a","txn":"a","messageId":"m","deliverAt":"2026-11-29T10:09:26.024349Z"},
		{"ok":true,"status":"rescheduled","queue":"q","timerKey":"b","txn":"b","messageId":"m","deliverAt":"2026-11-29T10:09:26.024349Z"},
		{"ok":true,"status":"scheduled","queue":"q","timerKey":"c","txn":"x","messageId":"m","deliverAt":"2026-11-29T10:09:26.024349Z"}]}`
	recs, v := checkTimers(200, []byte(body), []string{"a", "b", "c"})
	if v.good != 1 || v.bad != 2 || len(recs) != 1 || recs[0].txn != "a" {
		t.Fatalf("got %+v %+v", recs, v)
	}
	want := time.Date(2026, 11, 29, 10, 9, 26, 24349000, time.UTC)
	if !recs[0].deliverAt.Equal(want) {
		t.Errorf("deliverAt %v, want %v", recs[0].deliverAt, want)
	}
	if _, v := checkTimers(200, []byte(body), []string{"a"}); v.kind != "schedule result count" {
		t.Errorf("count: %+v", v)
	}
	if _, v := checkTimers(400, []byte(`{"error":"timers_bad_request"}`), []string{"a"}); v.kind != "schedule HTTP 400" {
		t.Errorf("400: %+v", v)
	}
}

func TestCheckTimerPop(t *testing.T) {
	body := `{"success":true,"messages":[
		{"transactionId":"a","partitionId":"p","leaseId":"l","createdAt":"2026-11-29T10:09:26.035734Z"},
		{"transactionId":"b","partitionId":"p","leaseId":"l","createdAt":"garbage"}]}`
	fires, items, v := checkTimerPop(200, []byte(body))
	if len(fires) != 1 || len(items) != 2 || v.good != 1 || v.bad != 1 {
		t.Fatalf("got %+v %+v %+v", fires, items, v)
	}
	if fires[0].createdAt.Nanosecond() != 35734000 {
		t.Errorf("createdAt %v", fires[0].createdAt)
	}
}

func TestParseFlagsURLsAndStart(t *testing.T) {
	o, names, err := parseFlags([]string{"-urls", "http://127.0.0.1:1/, http://127.0.0.1:2,"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.urls) != 2 || o.url != "http://127.0.0.1:1" || o.urls[1] != "http://127.0.0.1:2" {
		t.Errorf("urls %q url %q", o.urls, o.url)
	}
	if names["failover"] || names["rss"] || !names["exactly-once"] || !names["timers"] {
		t.Errorf("all with -urls: %v", names)
	}
	o, names, err = parseFlags([]string{"-start", "3", "-node-args", "--log-level warn"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.start != 3 || o.nodeArgs != "--log-level warn" || !names["failover"] || names["rss"] {
		t.Errorf("-start 3: start %d node-args %q, names %v", o.start, o.nodeArgs, names)
	}
	o, names, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.urls) != 1 || o.urls[0] != o.url || o.start != 0 || names["failover"] {
		t.Errorf("single node: urls %q, start %d, names %v", o.urls, o.start, names)
	}
	for _, bad := range [][]string{{"-start", "-1"}, {"-start", "3", "-urls", "http://x"}, {"-timer-batch", "300"}, {"-scenario", "nope"}} {
		if _, _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSelectScenariosKeepsExplicit(t *testing.T) {
	names, err := selectScenarios("rss,all,failover", false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !names["rss"] || !names["failover"] || !names["push-batch"] {
		t.Errorf("%v", names)
	}
}

func TestClientsPick(t *testing.T) {
	cs := newClients([]string{"a", "b", "c"}, 7, time.Second)
	defer cs.close()
	var got []string
	for w := range 5 {
		got = append(got, cs.pick(w).base)
	}
	if strings.Join(got, "") != "abcab" {
		t.Errorf("pick: %v", got)
	}
	if u := cs.used(2); len(u) != 2 || u[1] != "b" {
		t.Errorf("used(2) = %v", u)
	}
	if cs[0].tr.MaxConnsPerHost != 3 {
		t.Errorf("per-node conns %d, want 3", cs[0].tr.MaxConnsPerHost)
	}
}

// TestStartOneNode runs bench the way scripts/bench.sh does: it builds
// queen-node, starts one throwaway node itself, runs a short scenario
// against it and stops the node.
func TestStartOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts a node; skipped with -short")
	}
	var stdout, stderr bytes.Buffer
	rc := run([]string{"-start", "1", "-scenario", "latency", "-duration", "1s", "-node-args", "--log-level warn"}, &stdout, &stderr)
	if rc != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", rc, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "latency") || !strings.Contains(stderr.String(), "bench: node n1 pid ") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
