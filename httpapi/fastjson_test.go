package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/queen-node/queen-node/command"
)

var (
	testID  = []byte{0x01, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x70, 0x34, 0x85, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23}
	testPID = []byte{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00}
	// strings a client may send: quotes, escapes, HTML, control bytes, non-ASCII
	awkward = "a\"b\\c</script>&\u2028\x01\ttab ünï 😀"
)

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPushResultsJSON(t *testing.T) {
	res := &command.PushResult{Items: []*command.PushItemResult{
		{Status: command.PushItemResult_QUEUED, MessageId: testID, PartitionId: testPID, TransactionId: awkward,
			Queue: "orders", Offset: 42, TraceId: "trace-1"},
		{Status: command.PushItemResult_DUPLICATE, MessageId: testID, PartitionId: testPID, TransactionId: "t2", Queue: "orders"},
		{Status: command.PushItemResult_FAILED, TransactionId: "t3", Queue: "orders", Error: "Queue is paused: " + awkward},
	}}
	got := decodeAny(t, appendPushResults(nil, res))
	id, pid := *uuidString(testID), *uuidString(testPID)
	want := []any{
		map[string]any{"index": 0.0, "status": "queued", "transaction_id": awkward, "transactionId": awkward,
			"message_id": id, "messageId": id, "partition_id": pid, "partitionId": pid, "trace_id": "trace-1",
			"queueName": "orders", "offset": 42.0},
		map[string]any{"index": 1.0, "status": "duplicate", "transaction_id": "t2", "transactionId": "t2",
			"message_id": id, "messageId": id, "partition_id": pid, "partitionId": pid, "trace_id": nil,
			"queueName": "orders"},
		map[string]any{"index": 2.0, "status": "failed", "transaction_id": "t3", "transactionId": "t3",
			"message_id": nil, "messageId": nil, "partition_id": nil, "partitionId": nil, "trace_id": nil,
			"queueName": "orders", "error": "Queue is paused: " + awkward},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("push results:\n got %#v\nwant %#v", got, want)
	}
	if got := decodeAny(t, appendPushResults(nil, &command.PushResult{})); !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("empty push: %#v", got)
	}
}

func TestPopResultJSON(t *testing.T) {
	res := &command.PopResult{Queue: "orders", ConsumerGroup: "billing", LeaseId: "lease-1", PartitionsClaimed: 1,
		LeaseExpiresUs: 1_700_000_000_123_456,
		Messages: []*command.PoppedMessage{
			{PartitionId: testPID, Partition: "p-" + awkward, Queue: "orders", Seq: 7, RetryCount: 2},
			{PartitionId: testPID, Partition: "p-" + awkward, Queue: "orders", Seq: 8},
		},
		Records: []*command.MessageRecord{
			{Id: testID, TransactionId: awkward, TraceId: "tr", CreatedUs: 1_700_000_000_000_001, ProducerSub: "alice",
				Payload: []byte(`{"amount": 12.5, "note": "x<y"}`)},
			{Id: testID, TransactionId: "t2", CreatedUs: 1_700_000_000_000_002},
		}}
	got := decodeAny(t, appendPopResult(nil, res))
	id, pid := *uuidString(testID), *uuidString(testPID)
	msg := func(tx string, trace, sub any, data any, created string, retry float64) map[string]any {
		return map[string]any{"id": id, "transactionId": tx, "traceId": trace, "data": data, "producerSub": sub,
			"createdAt": created, "queue": "orders", "partition": "p-" + awkward, "partitionId": pid,
			"leaseId": "lease-1", "consumerGroup": "billing", "retryCount": retry}
	}
	want := map[string]any{"success": true, "queue": "orders", "partition": "p-" + awkward, "partitionId": pid,
		"leaseId": "lease-1", "consumerGroup": "billing", "partitionsClaimed": 1.0,
		"leaseExpiresAt": isoMicros(1_700_000_000_123_456),
		"messages": []any{
			msg(awkward, "tr", "alice", map[string]any{"amount": 12.5, "note": "x<y"}, isoMicros(1_700_000_000_000_001), 2),
			msg("t2", nil, nil, nil, isoMicros(1_700_000_000_000_002), 0),
		}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pop result:\n got %#v\nwant %#v", got, want)
	}
	if isoMicros(1_700_000_000_123_456) != "2023-11-14T22:13:20.123456Z" {
		t.Fatalf("isoMicros: %s", isoMicros(1_700_000_000_123_456))
	}
	res.LeaseExpiresUs = 0 // autoAck: no lease, no expiry member
	if m := decodeAny(t, appendPopResult(nil, res)).(map[string]any); m["leaseExpiresAt"] != nil {
		t.Fatalf("autoAck pop has leaseExpiresAt: %v", m["leaseExpiresAt"])
	}
}

func TestQuoteInvalidUTF8(t *testing.T) {
	got := decodeAny(t, appendString(nil, "ok\xffend"))
	if got != "ok\uFFFDend" {
		t.Fatalf("invalid UTF-8 quoted as %q", got)
	}
}
