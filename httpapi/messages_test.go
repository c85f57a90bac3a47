package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/auth/authtest"
)

func (l *live) hash() string {
	idx, h, err := l.node.StateHash()
	if err != nil {
		l.t.Fatal(err)
	}
	return fmt.Sprint(h, "@", idx)
}

// refused checks a 4xx: its status, a clear {"error"} (containing text
// when given), and that the call wrote nothing.
func (l *live) refused(method, path, body string, want int, text string) {
	l.t.Helper()
	before := l.hash()
	code, b := l.do(method, path, body)
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(b, &e)
	if code != want || e.Error == "" || !strings.Contains(e.Error, text) {
		l.t.Fatalf("%s %s %s: %d %s, want %d with %q", method, path, body, code, b, want, text)
	}
	if !authtest.Unchanged(l.hash, before, func() { l.do(method, path, body) }) {
		l.t.Fatalf("%s %s: refused with %d but the state changed", method, path, code)
	}
}

func (l *live) pushOne(queue, partition, txn, payload string) string {
	l.t.Helper()
	var out []struct {
		PartitionID string `json:"partitionId"`
		Status      string `json:"status"`
	}
	l.json("POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"partition":%q,"transactionId":%q,"payload":%s}]}`,
		queue, partition, txn, payload), 201, &out)
	return out[0].PartitionID
}

type msgRow struct {
	ID, TransactionID, PartitionID, Queue, Partition, Status, QueueStatus string
	BusStatus                                                             struct{ ConsumedBy, TotalGroups int }
	Payload                                                               json.RawMessage
	ErrorMessage                                                          *string
	ConsumerGroups                                                        []struct {
		Name     string
		Consumed bool
	}
	DeadLetters []struct{ DlqID string }
}

// GET /api/v1/messages and /:p/:t, DELETE /:p/:t, with every refusal.
func TestLiveMessagesInspectAndDelete(t *testing.T) {
	l := startLive(t)
	pid := l.pushOne("orders", "eu", "o1", `{"n":1}`)
	l.pushOne("orders", "eu", "o2", `{"n":2}`)
	l.pushOne("orders", "eu", "o3", `{"n":3}`)
	p := l.pop("/api/v1/pop/queue/orders?batch=1")
	l.json("POST", "/api/v1/ack", ackBody(p.Messages[0], "completed"), 200, nil)
	var list struct {
		Messages []msgRow
		Mode     struct {
			HasQueueMode bool
			Type         string
		}
	}
	l.json("GET", "/api/v1/messages?queue=orders", "", 200, &list)
	if len(list.Messages) != 3 || list.Mode.Type != "queue" {
		t.Fatalf("list %+v", list)
	}
	got := map[string]string{}
	for _, m := range list.Messages {
		got[m.TransactionID] = m.Status
	}
	if got["o1"] != "completed" || got["o2"] != "pending" || list.Messages[0].TransactionID != "o3" {
		t.Fatalf("statuses %v (newest first: %s)", got, list.Messages[0].TransactionID)
	}
	l.json("GET", "/api/v1/messages?queue=orders&status=completed", "", 200, &list)
	if len(list.Messages) != 1 {
		t.Fatalf("status filter: %+v", list.Messages)
	}
	var one msgRow
	l.json("GET", "/api/v1/messages/"+pid+"/o2", "", 200, &one)
	if string(one.Payload) != `{"n":2}` || one.Status != "pending" || len(one.ConsumerGroups) != 1 {
		t.Fatalf("detail %+v", one)
	}
	l.refused("GET", "/api/v1/messages/"+pid+"/nope", "", 404, "Message not found")
	l.refused("GET", "/api/v1/messages/not-a-uuid/o2", "", 400, "partitionId must be a UUID")
	l.refused("GET", "/api/v1/messages?status=bogus", "", 400, "status must be one of")
	l.refused("GET", "/api/v1/messages?from=yesterday", "", 400, "from must be an ISO-8601 time")
	l.refused("GET", "/api/v1/messages?to=2020-01-01T00:00:00Z&from=2021-01-01T00:00:00Z", "", 400, "from must not be after to")
	l.refused("DELETE", "/api/v1/messages/not-a-uuid/o2", "", 400, "partitionId must be a UUID")

	var del struct {
		Success                             bool
		PartitionID, TransactionID, Message string
	}
	l.json("DELETE", "/api/v1/messages/"+pid+"/o2", "", 200, &del)
	if !del.Success || del.PartitionID != pid || del.TransactionID != "o2" {
		t.Fatalf("delete %+v", del)
	}
	l.refused("GET", "/api/v1/messages/"+pid+"/o2", "", 404, "Message not found")
	before := l.hash()
	l.json("DELETE", "/api/v1/messages/"+pid+"/o2", "", 200, &del)
	if del.Success || del.Message != "Message not found" || !authtest.Unchanged(l.hash, before, func() { l.do("DELETE", "/api/v1/messages/"+pid+"/o2", "") }) {
		t.Fatalf("second delete %+v", del)
	}
	// The deleted message is never delivered: the next pop gets o3.
	if p := l.pop("/api/v1/pop/queue/orders?batch=5"); len(p.Messages) != 1 || p.Messages[0].TransactionID != "o3" {
		t.Fatalf("after the delete: %+v", p.Messages)
	}
	var audit struct{ Records []struct{ Action string } }
	l.json("GET", "/api/v1/system/audit", "", 200, &audit)
	if len(audit.Records) == 0 || audit.Records[0].Action != "delete_message" {
		t.Fatalf("audit %+v", audit)
	}
}

type dlqRow struct {
	DlqID, TransactionID, PartitionID, ConsumerGroup string
}

func (l *live) deadLetters(queue string) []dlqRow {
	var out struct{ Messages []dlqRow }
	l.json("GET", "/api/v1/dlq?queue="+queue, "", 200, &out)
	return out.Messages
}

// failOnce pops the queue (or "queue/partition") under group (retryLimit
// 0) and fails the message into the DLQ.
func (l *live) failOnce(queue, group string) {
	l.t.Helper()
	path := "/api/v1/pop/queue/" + queue + "?batch=1"
	if q, p, ok := strings.Cut(queue, "/"); ok {
		path = "/api/v1/pop/queue/" + q + "/partition/" + p + "?batch=1"
	}
	if group != "" {
		path += "&consumerGroup=" + group + "&subscriptionMode=all"
	}
	p := l.pop(path)
	if len(p.Messages) != 1 {
		l.t.Fatalf("pop %s: %+v", path, p)
	}
	m := p.Messages[0]
	m.ConsumerGroup = group
	l.json("POST", "/api/v1/ack", ackBody(m, "failed"), 200, nil)
}

type replayOut struct {
	Success                                                bool
	Verdict, DlqID, TransactionID, Queue, Partition, Error string
}

// Replay by id and by message, moved once, then 404 gone; every refusal;
// the purge names one queue; both are in the audit trail.
func TestLiveDeadLetterReplayAndPurge(t *testing.T) {
	l := startLive(t)
	l.json("POST", "/api/v1/configure", `{"queue":"jobs","options":{"retryLimit":0}}`, 200, nil)
	pid := l.pushOne("jobs", "Default", "j1", `{"job":1}`)
	l.failOnce("jobs", "")
	dls := l.deadLetters("jobs")
	if len(dls) != 1 || len(dls[0].DlqID) != 40 {
		t.Fatalf("dlq %+v", dls)
	}
	var detail msgRow
	l.json("GET", "/api/v1/messages/"+pid+"/j1", "", 200, &detail)
	if detail.Status != "dead_letter" || len(detail.DeadLetters) != 1 || detail.DeadLetters[0].DlqID != dls[0].DlqID {
		t.Fatalf("detail of a dead letter: %+v", detail)
	}
	id := dls[0].DlqID
	l.refused("POST", "/api/v1/dlq/zzz/replay", "", 400, "invalid dead letter id")
	l.refused("POST", "/api/v1/dlq/"+id+"/replay", `{"partition":"x"}`, 400, "partition needs queue")
	l.refused("POST", "/api/v1/dlq/"+id+"/replay", `{"queue":5}`, 400, "queue must be a string")
	l.refused("POST", "/api/v1/dlq/"+id+"/replay", `[1]`, 400, "JSON object")
	var r replayOut
	l.json("POST", "/api/v1/dlq/"+id+"/replay", "", 200, &r)
	if !r.Success || r.Verdict != "moved" || r.TransactionID != "dlq:"+id || r.Queue != "jobs" {
		t.Fatalf("replay %+v", r)
	}
	if len(l.deadLetters("jobs")) != 0 {
		t.Fatal("the record stayed")
	}
	l.refused("POST", "/api/v1/dlq/"+id+"/replay", "", 404, "Dead letter not found")
	p := l.pop("/api/v1/pop/queue/jobs?batch=5")
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "dlq:"+id || string(p.Messages[0].Data) != `{"job":1}` {
		t.Fatalf("the replayed message: %+v", p.Messages)
	}
	l.json("POST", "/api/v1/ack", ackBody(p.Messages[0], "completed"), 200, nil)

	// By message, under a group, to another queue.
	pid2 := l.pushOne("jobs", "other", "j2", `{"job":2}`)
	l.failOnce("jobs/other", "billing")
	l.refused("POST", "/api/v1/messages/"+pid2+"/j2/retry", "", 404, "Dead letter not found") // queue mode has none
	l.refused("POST", "/api/v1/messages/bad/j2/retry", "", 400, "partitionId must be a UUID")
	l.json("POST", "/api/v1/messages/"+pid2+"/j2/retry?consumerGroup=billing", `{"queue":"jobs.retry"}`, 200, &r)
	if r.Verdict != "moved" || r.Queue != "jobs.retry" || r.Partition != "Default" {
		t.Fatalf("retry %+v", r)
	}
	l.refused("POST", "/api/v1/messages/"+pid2+"/j2/retry?consumerGroup=billing", "", 404, "Dead letter not found")

	// Purge: one queue, never all.
	l.pushOne("jobs", "Default", "j3", `{}`)
	l.pushOne("jobs", "Default", "j4", `{}`)
	l.failOnce("jobs", "")
	l.failOnce("jobs", "")
	l.refused("DELETE", "/api/v1/dlq", "", 400, "queue is required")
	var purge struct{ Purged int }
	l.json("DELETE", "/api/v1/dlq?queue=jobs", "", 200, &purge)
	if purge.Purged != 2 || len(l.deadLetters("jobs")) != 0 {
		t.Fatalf("purge %+v", purge)
	}
	var audit struct {
		Records []struct{ Action, Detail string }
	}
	l.json("GET", "/api/v1/system/audit", "", 200, &audit)
	var actions []string
	for _, a := range audit.Records {
		actions = append(actions, a.Action)
	}
	if s := strings.Join(actions, ","); s != "dlq_purge,dlq_replay,dlq_replay" {
		t.Fatalf("audit trail %s", s)
	}
}

// Traces: record (201 and its 400s, 404 for an unknown message), by
// message, by name (by-name wins over :p/:t), names; gone with the message.
func TestLiveTraces(t *testing.T) {
	l := startLive(t)
	pid := l.pushOne("orders", "Default", "o1", `{"order":1}`)
	l.pushOne("orders", "Default", "o2", `{"order":2}`)
	body := func(txn string, extra string) string {
		return fmt.Sprintf(`{"transactionId":%q,"partitionId":%q%s}`, txn, pid, extra)
	}
	var rec struct {
		Success bool
		TraceID string
	}
	l.json("POST", "/api/v1/traces", body("o1", `,"traceNames":["checkout","pay"],"eventType":"step","data":{"s":1}`), 201, &rec)
	if !rec.Success || len(rec.TraceID) != 36 {
		t.Fatalf("record %+v", rec)
	}
	l.json("POST", "/api/v1/traces", body("o1", `,"traceNames":"checkout","data":{"s":2}`), 201, nil)
	l.json("POST", "/api/v1/traces", body("o2", `,"traceNames":null,"data":null`), 201, nil)
	l.refused("POST", "/api/v1/traces", `{"partitionId":"`+pid+`","data":{}}`, 400, "transactionId and partitionId are required")
	l.refused("POST", "/api/v1/traces", `{"transactionId":"o1","data":{}}`, 400, "transactionId and partitionId are required")
	l.refused("POST", "/api/v1/traces", body("o1", ``), 400, "data is required")
	l.refused("POST", "/api/v1/traces", body("o1", `,"traceNames":5,"data":{}`), 400, "traceNames must be")
	l.refused("POST", "/api/v1/traces", body("nope", `,"data":{}`), 404, "Message not found")
	l.refused("POST", "/api/v1/traces", `{"transactionId":"o1","partitionId":"x","data":{}}`, 400, "partitionId must be a UUID")
	l.refused("POST", "/api/v1/traces", ``, 400, "Empty request body")
	var mine struct {
		Traces []struct {
			EventType  string   `json:"event_type"`
			TraceNames []string `json:"trace_names"`
			Data       json.RawMessage
		}
	}
	l.json("GET", "/api/v1/traces/"+pid+"/o1", "", 200, &mine)
	if len(mine.Traces) != 2 || mine.Traces[0].EventType != "step" || string(mine.Traces[1].Data) != `{"s":2}` {
		t.Fatalf("by message %+v", mine)
	}
	var byName struct {
		Traces []struct {
			TransactionID  string          `json:"transaction_id"`
			QueueName      string          `json:"queue_name"`
			MessagePayload json.RawMessage `json:"message_payload"`
		}
		Total int
	}
	l.json("GET", "/api/v1/traces/by-name/checkout", "", 200, &byName)
	if byName.Total != 2 || byName.Traces[0].QueueName != "orders" || string(byName.Traces[0].MessagePayload) != `{"order":1}` {
		t.Fatalf("by name %+v", byName)
	}
	l.json("GET", "/api/v1/traces/by-name/"+url.PathEscape("x"), "", 200, &byName) // not a partitionId/transactionId pair
	var names struct {
		Names []struct {
			TraceName    string `json:"trace_name"`
			TraceCount   int    `json:"trace_count"`
			MessageCount int    `json:"message_count"`
		}
		Total int
	}
	l.json("GET", "/api/v1/traces/names", "", 200, &names)
	if names.Total != 2 || names.Names[0].TraceName != "checkout" || names.Names[0].TraceCount != 2 || names.Names[0].MessageCount != 1 {
		t.Fatalf("names %+v", names)
	}
	l.json("DELETE", "/api/v1/messages/"+pid+"/o1", "", 200, nil)
	l.json("GET", "/api/v1/traces/names", "", 200, &names)
	if names.Total != 0 {
		t.Fatalf("traces outlived their message: %+v", names)
	}
	if code, b := l.do("GET", "/api/v1/traces/"+pid+"/o1", ""); code != 200 || !bytes.Contains(b, []byte(`"traces":[]`)) {
		t.Fatalf("traces of a deleted message: %d %s", code, b)
	}
}
