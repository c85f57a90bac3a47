package queen

import (
	"encoding/json"
	"reflect"
	"testing"
)

// pushBody writes by hand what encoding/json would write for the same items.
func TestPushBodyMatchesEncodingJSON(t *testing.T) {
	items := []pushItem{
		{Queue: "orders", Partition: "eu", TransactionID: "t-1", TraceID: "tr-1", Payload: json.RawMessage(`{"amount":12,"note":"ü \u2028"}`)},
		{Queue: "orders", TransactionID: "t-2", Payload: json.RawMessage(`"plain"`)},
		{Queue: "q\"uote\\d", Partition: "p\x00\n\t<&>", TransactionID: "bad\xffutf8", Payload: json.RawMessage(`[1,2,null]`)},
		{Queue: "日本", TransactionID: "t-4", TraceID: "", Payload: json.RawMessage(`null`)},
	}
	got := pushBody(items)
	if !json.Valid(got) {
		t.Fatalf("pushBody is not JSON: %s", got)
	}
	in := make([]jsonPushItem, len(items))
	for i, it := range items {
		in[i] = toJSONPush(it)
	}
	want, err := json.Marshal(map[string]any{"items": in})
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("pushBody\n %s\nencoding/json\n %s", got, want)
	}
}

func TestPushBodyOfNoItems(t *testing.T) {
	if got := string(pushBody(nil)); got != `{"items":[]}` {
		t.Fatalf("got %s", got)
	}
}

// pushAnswer reads the broker's member names and an item's error.
func TestPushAnswerDecodes(t *testing.T) {
	var out pushAnswer
	if err := decodeAnswer([]byte(`[{"index":0,"status":"queued","transactionId":"t-1","messageId":"m-1","partitionId":"p-1","queueName":"orders"},`+
		`{"status":"failed","transactionId":"t-2","error":"queue is full"},{"status":"duplicate","transactionId":"t-3","messageId":"m-0","error":null}]`), &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].MessageID != "m-1" || out[0].PartitionID != "p-1" || out[0].Status != "queued" ||
		out[1].Error == nil || *out[1].Error != "queue is full" || out[2].Error != nil || out[2].TransactionID != "t-3" {
		t.Fatalf("decoded %+v", out)
	}
	if err := decodeAnswer([]byte(`{"not":"a list"}`), &out); err == nil {
		t.Fatal("an object decoded as a push answer")
	}
}

func BenchmarkPushBody(b *testing.B) {
	items := make([]pushItem, 100)
	for i := range items {
		items[i] = pushItem{Queue: "orders", TransactionID: newTransactionID(), Payload: json.RawMessage(`{"order":12345,"amount":"99.50","customer":"c-778","note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		pushBody(items)
	}
}
