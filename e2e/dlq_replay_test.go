package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Dead letters on a three-node cluster: a message that fails goes to the
// DLQ, its replay moves it (one entry: a new message dlq:<id> and the
// record gone), a retried replay is 404 gone, and a SIGKILL of the leader
// while a replay is in flight leaves the record or the message, never both
// and never neither. Traces recorded on a message go with it when
// retention removes it.
func TestDeadLetterReplayOnACluster(t *testing.T) {
	c := startCluster(t, nodeOpts{RetentionIntervalMs: 1000})
	lead := c.leader(30 * time.Second)
	follower := c.others(lead)[0]
	a := follower.api(t) // writes go through a follower: forwarded to the leader
	a.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "jobs", "options": map[string]any{"retryLimit": 0}})
	pid := a.pushOne(pushItem{Queue: "jobs", TransactionID: "j1", Payload: map[string]any{"job": 1}}, "queued").PartitionID
	a.pushOne(pushItem{Queue: "jobs", TransactionID: "j2", Payload: map[string]any{"job": 2}}, "queued")
	for _, txn := range []string{"j1", "j2"} {
		p := a.pop("/api/v1/pop/queue/jobs", url.Values{"batch": {"1"}})
		if p == nil || p.Messages[0].TransactionID != txn {
			t.Fatalf("pop %s: %+v", txn, p)
		}
		m := p.Messages[0]
		r := a.ack(ackReq{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "failed", Error: strp("boom")})
		if !r.DLQ {
			t.Fatalf("ack of %s did not dead-letter it: %+v", txn, r)
		}
	}
	ids := map[string]string{} // transactionId → dlqId
	var dlq struct {
		Messages []struct{ DlqID, TransactionID string }
	}
	a.mustStatus(200, "GET", "/api/v1/dlq?queue=jobs", nil).decode(t, &dlq)
	for _, d := range dlq.Messages {
		ids[d.TransactionID] = d.DlqID
	}
	if len(ids) != 2 || len(ids["j1"]) != 40 {
		t.Fatalf("dead letters %+v", dlq)
	}

	// Replay j1: moved; the retried call is gone; the message is there once.
	var rep struct{ Verdict, TransactionID string }
	a.mustStatus(200, "POST", "/api/v1/dlq/"+ids["j1"]+"/replay", nil).decode(t, &rep)
	if rep.Verdict != "moved" || rep.TransactionID != "dlq:"+ids["j1"] {
		t.Fatalf("replay %+v", rep)
	}
	if r := a.must("POST", "/api/v1/dlq/"+ids["j1"]+"/replay", nil); r.Status != http.StatusNotFound || errCode(r) != "gone" {
		t.Fatalf("retried replay: %s, want 404 gone", r)
	}
	a.mustStatus(200, "GET", "/api/v1/messages/"+pid+"/"+url.PathEscape("dlq:"+ids["j1"]), nil)

	// Replay j2 at the leader and kill it while the call is in flight.
	answered := make(chan *response, 1)
	go func() {
		r, err := lead.send(5*time.Second, "POST", "/api/v1/dlq/"+ids["j2"]+"/replay", nil, nil)
		if err != nil {
			r = nil
		}
		answered <- r
	}()
	time.Sleep(2 * time.Millisecond)
	lead.kill9()
	first := <-answered
	newLead := c.leader(30 * time.Second)
	b := newLead.api(t)
	hasRecord := func() bool {
		a.mustStatus(200, "GET", "/api/v1/dlq?queue=jobs", nil).decode(t, &dlq)
		for _, d := range dlq.Messages {
			if d.DlqID == ids["j2"] {
				return true
			}
		}
		return false
	}
	hasMessage := func() bool {
		r := b.must("GET", "/api/v1/messages/"+pid+"/"+url.PathEscape("dlq:"+ids["j2"]), nil)
		if r.Status != 200 && r.Status != 404 {
			t.Fatalf("message view: %s", r)
		}
		return r.Status == 200
	}
	rec, msg := hasRecord(), hasMessage()
	t.Logf("replay in flight at the kill: answer %v; after: record %v, message %v", first, rec, msg)
	if rec == msg {
		t.Fatalf("after the kill: record %v and message %v (want exactly one)", rec, msg)
	}
	if first != nil && first.Status == 200 && rec {
		t.Fatal("the replay was answered moved, yet the record is still there")
	}
	// The client retries (the answer may have been lost): moved if the
	// record was still there, gone otherwise; either way the message is
	// there once and the record is gone.
	r := c.sendRetry(newLead, 30*time.Second, "POST", "/api/v1/dlq/"+ids["j2"]+"/replay", nil, nil)
	if (rec && r.Status != 200) || (!rec && r.Status != 404) {
		t.Fatalf("the retried replay: %s (record was there: %v)", r, rec)
	}
	if hasRecord() || !hasMessage() {
		t.Fatal("after the retry: the record is there or the message is not")
	}
	var list struct {
		Messages []struct{ TransactionID string }
	}
	b.mustStatus(200, "GET", "/api/v1/messages?queue=jobs", nil).decode(t, &list)
	n := 0
	for _, m := range list.Messages {
		if m.TransactionID == "dlq:"+ids["j2"] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the replayed message is there %d times", n)
	}
	lead.restart()
	c.waitRejoined(lead, 60*time.Second)

	// Traces go with their message when retention removes it.
	b.mustStatus(200, "POST", "/api/v1/configure", map[string]any{"queue": "traced",
		"options": map[string]any{"retentionEnabled": true, "retentionSeconds": 3}})
	tpid := b.pushOne(pushItem{Queue: "traced", TransactionID: "t1", Payload: map[string]any{"t": 1}}, "queued").PartitionID
	b.mustStatus(201, "POST", "/api/v1/traces", map[string]any{"transactionId": "t1", "partitionId": tpid,
		"traceNames": []string{"e2e-flow"}, "data": map[string]any{"step": 1}})
	var byName struct{ Total int }
	b.mustStatus(200, "GET", "/api/v1/traces/by-name/e2e-flow", nil).decode(t, &byName)
	if byName.Total != 1 {
		t.Fatalf("by name before retention: %+v", byName)
	}
	ok, detail := pollUntil(20*time.Second, 250*time.Millisecond, func() (bool, string) {
		r := b.must("GET", "/api/v1/messages/"+tpid+"/t1", nil)
		byName.Total = -1
		b.mustStatus(200, "GET", "/api/v1/traces/by-name/e2e-flow", nil).decode(t, &byName)
		return r.Status == 404 && byName.Total == 0, r.String()
	})
	if !ok {
		t.Fatalf("retention did not remove the message and its trace: %s, traces %d", detail, byName.Total)
	}
	for _, n := range c.nodes { // every replica removes it (its own state: it may lag a moment)
		ok, detail := pollUntil(10*time.Second, 100*time.Millisecond, func() (bool, string) {
			r := n.api(t).mustStatus(200, "GET", "/api/v1/traces/names?consistency=stale", nil)
			return !strings.Contains(string(r.Body), "e2e-flow"), r.String()
		})
		if !ok {
			t.Fatalf("node %s still lists the trace: %s", n.ID(), detail)
		}
	}
}
