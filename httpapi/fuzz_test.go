package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// The fuzz targets send arbitrary bodies through the real handler over the
// fake backend and check, for every input:
//
//   - no panic and never a 5xx (the fake never fails, so a 5xx is the
//     handler's own: a recovered panic or a result it cannot shape);
//   - a 4xx carries the error envelope {"error": "<string>"} as JSON, and
//     nothing reached Apply (bad input changes nothing);
//   - a 2xx body is valid JSON (204: no body);
//   - whatever did reach Apply is well formed: names the state can key,
//     exactly one expiry on KV writes, one write per key, and so on.
//
// Known bugs with their own failing unit tests are not asserted here, so
// that fuzzing keeps looking for new ones: durations that overflow
// microseconds (TestDurationsFitInMicroseconds), the pop timeout wrap
// (TestPopTimeoutDoesNotWrap) and unkeyable pop groups
// (TestPopUnkeyableConsumerGroup).

// fuzzMaxBody is small enough that the fuzzer can reach the 413 path.
const fuzzMaxBody = 8 << 10

type fuzzRig struct {
	fb  *fakeBackend
	api *API
}

func newFuzzRig(f *testing.F) *fuzzRig {
	fb := newFakeBackend(f)
	return &fuzzRig{fb: fb, api: newTestAPI(fb, fuzzMaxBody)}
}

// send runs one request and checks the invariants common to every target.
func (r *fuzzRig) send(t *testing.T, method, target string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r.fb.reset()
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.api.ServeHTTP(rec, req)
	switch code := rec.Code; {
	case code >= 500:
		t.Fatalf("%s %s %q: status %d, body %s", method, target, body, code, rec.Body.String())
	case code >= 400:
		errorEnvelope(t, rec)
		if n := len(r.fb.Applies()); n != 0 {
			t.Fatalf("%s %s %q: %d answer but Apply was called %d time(s)", method, target, body, code, n)
		}
	case code == http.StatusNoContent:
		if rec.Body.Len() != 0 {
			t.Fatalf("204 with a body: %q", rec.Body.String())
		}
	default:
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s %q: status %d with a body that is not JSON: %q", method, target, body, code, rec.Body.String())
		}
	}
	for _, cmd := range r.fb.Applies() {
		checkCommand(t, cmd)
	}
	if n := len(r.fb.Applies()); n > 1 {
		t.Fatalf("one request made %d Apply calls; every route is one entry", n)
	}
	return rec
}

// checkCommand fails t when cmd carries something the decoder should have
// refused.
func checkCommand(t *testing.T, cmd *command.Command) {
	t.Helper()
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		if len(b.Push.Items) == 0 {
			t.Fatal("a push entry with no items")
		}
		for _, it := range b.Push.Items {
			checkPushItem(t, it)
		}
	case *command.Command_Ack:
		if len(b.Ack.Items) == 0 {
			t.Fatal("an ack entry with no items")
		}
		for _, it := range b.Ack.Items {
			checkAckItem(t, it)
		}
	case *command.Command_Transaction:
		in := b.Transaction
		if len(in.TransactionId) != 16 {
			t.Fatalf("transaction id of %d bytes", len(in.TransactionId))
		}
		for _, op := range in.Ops {
			switch o := op.Op.(type) {
			case *command.TxnOp_Ack:
				checkAckItem(t, o.Ack)
			case *command.TxnOp_Push:
				checkPushItem(t, o.Push)
			default:
				t.Fatalf("transaction op of type %T", op.Op)
			}
		}
		for _, op := range in.Kv {
			if op.Kind == command.KVOp_GET_PREFIX {
				t.Fatal("getPrefix reached a transaction")
			}
		}
		checkKVOps(t, in.Kv)
		checkTimerOps(t, in.Timers)
	case *command.Command_Kv:
		if len(b.Kv.Ops) == 0 {
			t.Fatal("a KV entry with no ops")
		}
		checkKVOps(t, b.Kv.Ops)
	case *command.Command_Configure:
		if err := request.CheckName("queue", b.Configure.Queue); err != nil {
			t.Fatalf("configure: %v", err)
		}
		o := b.Configure.Options
		for name, v := range map[string]*int64{"leaseTime": o.LeaseTime, "retryLimit": o.RetryLimit, "retryDelay": o.RetryDelay,
			"maxSize": o.MaxSize, "delayedProcessing": o.DelayedProcessing, "windowBuffer": o.WindowBuffer, "ttl": o.Ttl,
			"retentionSeconds": o.RetentionSeconds, "completedRetentionSeconds": o.CompletedRetentionSeconds,
			"maxWaitTimeSeconds": o.MaxWaitTimeSeconds} {
			if v != nil && *v < 0 {
				t.Fatalf("configure: option %s = %d", name, *v)
			}
		}
	case *command.Command_ExtendLease:
		if s := b.ExtendLease.Seconds; s < 1 || s > 7*24*3600 {
			t.Fatalf("extend by %d seconds", s)
		}
	case *command.Command_Timers:
		if len(b.Timers.Ops) == 0 {
			t.Fatal("a timer entry with no ops")
		}
		checkTimerOps(t, b.Timers.Ops)
	case *command.Command_Locks:
		checkLocksCommand(t, cmd)
	default:
		t.Fatalf("unexpected command %T", cmd.Body)
	}
}

func checkPushItem(t *testing.T, it *command.PushItem) {
	t.Helper()
	if err := request.CheckName("queue", it.Queue); err != nil {
		t.Fatalf("push: %v", err)
	}
	if err := request.CheckName("partition", it.Partition); err != nil || it.Partition == "" {
		t.Fatalf("push: partition %q (%v)", it.Partition, err)
	}
	if it.TransactionId == "" || len(it.TransactionId) > request.MaxTxnIDBytes {
		t.Fatalf("push: transactionId of %d bytes", len(it.TransactionId))
	}
	if it.TraceId != "" {
		if _, err := uuid.Parse(it.TraceId); err != nil || len(it.TraceId) != 36 {
			t.Fatalf("push: traceId %q", it.TraceId)
		}
	}
	if len(it.MessageId) != 16 {
		t.Fatalf("push: message id of %d bytes", len(it.MessageId))
	}
	if !json.Valid(it.Payload) {
		t.Fatalf("push: payload is not JSON: %q", it.Payload)
	}
	if it.ProducerSub != "" {
		t.Fatalf("push: producerSub %q taken from the body", it.ProducerSub)
	}
}

func checkAckItem(t *testing.T, it *command.AckItem) {
	t.Helper()
	if it.TransactionId == "" {
		t.Fatal("ack: empty transactionId")
	}
	if err := request.CheckName("consumerGroup", it.ConsumerGroup); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if it.ConsumerGroup == command.QueueModeGroup {
		t.Fatal("ack: the reserved queue-mode group reached the state by name")
	}
	if len(it.PartitionId) != 0 && len(it.PartitionId) != 16 {
		t.Fatalf("ack: partition id of %d bytes", len(it.PartitionId))
	}
	if _, known := command.AckStatus_name[int32(it.Status)]; !known {
		t.Fatalf("ack: status %v", it.Status)
	}
}

// kvNamespace is the spec's namespace pattern (§4.7), as an independent
// oracle for what the rules let through.
var kvNamespace = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func checkKVOps(t *testing.T, ops []*command.KVOp) {
	t.Helper()
	written := map[string]bool{}
	for i, op := range ops {
		if !kvNamespace.MatchString(op.Ns) {
			t.Fatalf("kv op %d: namespace %q", i, op.Ns)
		}
		switch op.Kind {
		case command.KVOp_GET_MANY:
			if len(op.Keys) == 0 {
				t.Fatalf("kv op %d: getMany without keys", i)
			}
		case command.KVOp_GET_PREFIX:
			if op.Prefix == "" {
				t.Fatalf("kv op %d: getPrefix without prefix", i)
			}
		default:
			if op.Key == "" || len(op.Key) > request.MaxKVKeyBytes {
				t.Fatalf("kv op %d: key of %d bytes", i, len(op.Key))
			}
		}
		if op.Kind.NeedsExpiry() && (op.TtlSeconds > 0) == op.Forever {
			t.Fatalf("kv op %d (%v): ttlSeconds %d, forever %v: not exactly one expiry", i, op.Kind, op.TtlSeconds, op.Forever)
		}
		switch op.Kind {
		case command.KVOp_PUT, command.KVOp_PUT_IF_ABSENT, command.KVOp_CAS:
			if len(op.Value) > request.MaxKVValueBytes || !json.Valid(op.Value) {
				t.Fatalf("kv op %d: value of %d bytes, valid JSON %v", i, len(op.Value), json.Valid(op.Value))
			}
		}
		if op.Kind == command.KVOp_PUT_IF_ABSENT && op.HasExpect && op.Expect != 0 {
			t.Fatalf("kv op %d: putIfAbsent with expect %d", i, op.Expect)
		}
		if op.Kind == command.KVOp_CAS && !op.HasExpect {
			t.Fatalf("kv op %d: cas without expect", i)
		}
		if op.Kind.IsWrite() {
			k := op.Ns + "\x00" + op.Key
			if written[k] {
				t.Fatalf("kv op %d: a second write to %s/%s", i, op.Ns, op.Key)
			}
			written[k] = true
		}
	}
}

func checkTimerOps(t *testing.T, ops []*command.TimerOp) {
	t.Helper()
	seen := map[string]bool{}
	for i, op := range ops {
		if op.Queue == "" || op.TimerKey == "" || request.CheckName("queue", op.Queue) != nil || request.CheckName("timerKey", op.TimerKey) != nil {
			t.Fatalf("timer op %d: queue %q, key %q", i, op.Queue, op.TimerKey)
		}
		if k := op.Queue + "\x00" + op.TimerKey; seen[k] {
			t.Fatalf("timer op %d: (%q, %q) twice", i, op.Queue, op.TimerKey)
		} else {
			seen[k] = true
		}
		if op.Kind == command.TimerOp_CANCEL {
			continue
		}
		if len(op.MessageId) != 16 || op.Txn == "" || !json.Valid(op.Payload) || op.DelayUs > int64(request.MaxSeconds)*1e6 {
			t.Fatalf("timer op %d: %v", i, op)
		}
	}
}

// jsonArrayLen is the length of a JSON array body, or -1.
func jsonArrayLen(b []byte) int {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return -1
	}
	return len(a)
}

// memberArrayLen is the length of the array member name of the JSON
// object b (exact key, last one wins, as the handler reads it), or -1.
func memberArrayLen(b []byte, name string) int {
	var o map[string]json.RawMessage
	if err := json.Unmarshal(b, &o); err != nil {
		return -1
	}
	return jsonArrayLen(o[name])
}

func addSeeds(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

// Seeds shared by every body target: the generic parse failures of §1.1.
var commonSeeds = []string{``, ` `, `{`, `}`, `{}`, `[]`, `null`, `"x"`, `0`, `{"a":}`, `{} {}`, "{\"a\":\"\xff\"}"}

func FuzzPushBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		// spec §4.2
		`{ "items": [ { "queue": "orders", "partition": "cust-42", "payload": {"orderId": 1},
               "transactionId": "order-1", "traceId": "019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40e1" } ] }`,
		`{"items":[]}`,
		`{"items":[{"queue":"orders","payload":null}]}`,
		`{"items":[{"queue":"orders"}]}`,
		`{"items":[{"queue":"orders","payload":{}},{"queue":"orders","payload":[1,2,3],"transactionId":"t"}]}`,
		`{"items":[{"queue":"q","data":"x","partition":null,"transactionId":null,"traceId":null}]}`,
		`{"items":[{"queue":"q","producerSub":"mallory"}]}`,
		`{"items":[{"queue":"q","traceId":"not-a-uuid"}]}`,
		`{"items":[{"queue":"q\u0000","partition":"p"}]}`,
		`{"items":[{"queue":1}]}`,
		`{"items":{"queue":"q"}}`,
		`{"items":[{"queue":"q","partition":7,"transactionId":[],"traceId":{}}]}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/push", body)
		if rec.Code == http.StatusCreated {
			if want := memberArrayLen(body, "items"); jsonArrayLen(rec.Body.Bytes()) != want {
				t.Fatalf("201 with results %s for %d items", rec.Body.String(), want)
			}
		}
	})
}

func FuzzAckBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		// spec §4.4
		`{ "transactionId": "order-1", "partitionId": "`+pid+`", "consumerGroup": "charger",
  "leaseId": "lease-1", "status": "completed", "error": null }`,
		`{"transactionId":"t","partitionId":"`+pid+`","status":"failed","error":"boom"}`,
		`{"transactionId":"t","partitionId":"`+pid+`","status":"dlq"}`,
		`{"transactionId":"t","partitionId":"`+pid+`","status":"retry","consumerGroup":null}`,
		`{"transactionId":"t","partitionId":"`+pid+`","status":false}`,
		`{"transactionId":"t","partitionId":"`+pid+`","status":"bogus"}`,
		`{"transactionId":"t","partitionId":"not-a-uuid","consumerGroup":"__QUEUE_MODE__"}`,
		`{"transactionId":"t"}`,
		`{"partitionId":"`+pid+`"}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/ack", body)
		if rec.Code == http.StatusOK {
			if n := jsonArrayLen(rec.Body.Bytes()); n != 1 {
				t.Fatalf("200 from /ack must be a one-item array: %s", rec.Body.String())
			}
		}
	})
}

func FuzzAckBatchBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		// spec §4.4
		`{ "consumerGroup": "charger",
  "acknowledgments": [ { "transactionId": "t1", "partitionId": "`+pid+`", "status": "completed", "leaseId": "lease-1" },
                       { "transactionId": "t2", "partitionId": "`+pid+`", "status": "failed", "error": "boom" } ] }`,
		`{"acknowledgments":[]}`,
		`{"consumerGroup":null,"acknowledgments":[{"transactionId":"t1","partitionId":"`+pid+`","status":"bogus"},{"transactionId":"t2","partitionId":"`+pid+`"}]}`,
		`{"acknowledgments":[{"transactionId":"t1"}]}`,
		`{"acknowledgments":{}}`,
		`{"acknowledgments":[5]}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/ack/batch", body)
		if rec.Code == http.StatusOK {
			if want := memberArrayLen(body, "acknowledgments"); jsonArrayLen(rec.Body.Bytes()) != want {
				t.Fatalf("200 with results %s for %d acknowledgments", rec.Body.String(), want)
			}
		}
	})
}

func FuzzTransactionBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		txnSpecExample,
		`{"operations":[{"type":"ack","transactionId":"order-1","partitionId":"`+pid+`","leaseId":"l","status":"completed"}]}`,
		`{"operations":[{"type":"push","queue":"receipts","partition":"cust-42","data":{"ok":true},"transactionId":"r1"}]}`,
		`{"operations":[],"kv":[{"op":"putIfAbsent","ns":"charges","key":"charge:ORD-1","value":{"chargeId":"ch_1"},"ttlSeconds":3600,"required":true}]}`,
		`{"operations":[],"kv":[{"op":"get","ns":"a","key":"k"},{"op":"getMany","ns":"a","keys":["x","y"]},{"op":"incr","ns":"a","key":"n","delta":2,"forever":true,"min":0,"max":10},{"op":"delete","ns":"a","key":"d","expect":4},{"op":"cas","ns":"a","key":"c","value":1,"expect":2,"ttlSeconds":5}]}`,
		`{"operations":[{"type":"x"}]}`,
		`{"operations":[{"type":"kv","op":"get","ns":"a","key":"k"}]}`,
		`{"operations":[],"kv":[{"op":"getPrefix","ns":"a","prefix":"p"}]}`,
		`{"operations":[]}`,
		`{"operations":[{"type":"ack","transactionId":"t","partitionId":"`+pid+`"}],"requiredLeases":["l1","l2"],"timers":[]}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/transaction", body)
		if rec.Code == http.StatusOK {
			var out map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("200 from /transaction is not an object: %s", rec.Body.String())
			}
			if _, ok := out["success"].(bool); !ok {
				t.Fatalf("200 from /transaction without a boolean success: %s", rec.Body.String())
			}
		}
	})
}

func FuzzKVBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		// spec §4.7 (the seed probe first)
		`{"operations":[{"op":"get","ns":"probe","key":"probe"}]}`,
		`{"operations":[{"op":"put","ns":"charges","key":"charge:ORD-1","value":{"chargeId":"ch_1"},"ttlSeconds":3600,"required":true}]}`,
		`[{"op":"putIfAbsent","ns":"a","key":"k","value":null,"forever":true}]`,
		`[{"op":"getMany","ns":"a","keys":["k1","k2"]},{"op":"getPrefix","ns":"a","prefix":"k","limit":5000,"after":"k1","keysOnly":true}]`,
		`[{"op":"incr","ns":"a","key":"n","delta":-3,"min":0,"max":100,"ttlSeconds":60}]`,
		`[{"op":"cas","ns":"a","key":"k","value":[1],"expect":7,"forever":true},{"op":"delete","ns":"a","key":"j","expect":0}]`,
		`[{"op":"check","ns":"a","key":"k","expect":3}]`,
		`{"operations":[{"op":"put","ns":"a","key":"k","value":1}]}`,
		`{"operations":[{"op":"put","ns":"A","key":"k","value":1,"forever":true}]}`,
		`[{"op":"put","ns":"a","key":"k","value":1,"forever":true},{"op":"put","ns":"a","key":"k","value":2,"forever":true}]`,
		`{"value":{"chargeId":"ch_1"},"ttlSeconds":3600}`,
		`{"value":1,"forever":true,"expect":0,"required":true}`,
		`{"expect":3}`,
		`{"op":"put","value":1,"forever":true}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/kv", body)
		if rec.Code == http.StatusOK {
			var out struct {
				OK      *bool
				Results []json.RawMessage
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.OK == nil {
				t.Fatalf("200 from /kv without ok: %s", rec.Body.String())
			}
			if *out.OK {
				if n := len(r.fb.Applies()) + len(r.fb.Reads()); n != 1 {
					t.Fatalf("one KV call made %d backend calls", n)
				}
				ops := jsonArrayLen(body) // a bare array
				if ops < 0 {
					ops = memberArrayLen(body, "operations")
				}
				if len(out.Results) != ops {
					t.Fatalf("%d results for %d ops (must be index-aligned): %s", len(out.Results), ops, rec.Body.String())
				}
			}
		}
		// The same bytes as a path-route body.
		r.send(t, "PUT", "/api/v1/kv/charges/charge:ORD-1", body)
		r.send(t, "DELETE", "/api/v1/kv/charges/charge:ORD-1", body)
	})
}

func FuzzTimersBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		// addendum §1.2, §2
		`{"operations":[{"op":"schedule","queue":"bookings","timerKey":"hold:1","delayMs":900000,"txn":"release-1","payload":"eyJiIjoxfQ=="}]}`,
		`[{"op":"reschedule","queue":"q","timerKey":"k","partition":"p","delayMs":-5,"txn":"t","payload":"","encrypted":"yes"}]`,
		`[{"op":"schedule","queue":"q","timerKey":"k","delayMs":1.5,"txn":"t","payload":"KLUv/SAAAQAA","payloadZstd":true}]`,
		`[{"op":"cancel","queue":"q","timerKey":"k","txn":"echo"},{"op":"cancel","queue":"q","timerKey":"k2"}]`,
		`[{"op":"cancel","queue":"q","timerKey":"k"},{"op":"cancel","queue":"q","timerKey":"k"}]`,
		`[{"op":"schedule","queue":"q","timerKey":"k","delayMs":1,"txn":"t","payload":"e30=","messageId":"x"}]`,
		`[{"op":"schedule","queue":"q","timerKey":"k","delayMs":99999999999,"txn":"t","payload":"e30="}]`,
		`[{"op":"schedule","queue":"q","timerKey":"k","txn":"t","payload":"!!"}]`,
		`{"operations":{}}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/timers", body)
		if rec.Code == http.StatusOK {
			var out struct{ Results []json.RawMessage }
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("200 from /timers is not an object: %s", rec.Body.String())
			}
			ops := jsonArrayLen(body)
			if ops < 0 {
				ops = memberArrayLen(body, "operations")
			}
			if len(out.Results) != ops {
				t.Fatalf("%d results for %d ops: %s", len(out.Results), ops, rec.Body.String())
			}
		}
	})
}

func FuzzConfigureBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		configureSpecExample,
		`{"queue":""}`,
		`{"queue":"orders","namespace":null,"task":null}`,
		`{"queue":"orders","options":{"leaseTime":1,"priority":-5,"unknown":{"x":1},"retentionEnabled":true}}`,
		`{"queue":"orders","options":{"leaseTime":"30"}}`,
		`{"queue":"orders","options":{"leaseTime":1e3,"retryLimit":3.0}}`,
		`{"queue":1}`,
		`{"queue":"orders","options":[]}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/configure", body)
		if rec.Code == http.StatusOK {
			var out map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["configured"] != true {
				t.Fatalf("200 from /configure without configured:true: %s", rec.Body.String())
			}
		}
	})
}

func FuzzLeaseExtendBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f, `{"seconds":60}`, `{"seconds":0}`, `{"seconds":"60"}`, `{"seconds":1.0}`, `{"seconds":604800}`, `{"seconds":null}`)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/lease/lease-1/extend", body)
		if rec.Code == http.StatusOK && jsonArrayLen(rec.Body.Bytes()) != 1 {
			t.Fatalf("200 from extend must be a one-item array: %s", rec.Body.String())
		}
	})
}

// FuzzPopQuery: any query string on either pop route answers without a
// 4xx (spec §4.3) and hands the backend in-range parameters.
func FuzzPopQuery(f *testing.F) {
	for _, q := range []string{
		"", "batch=10&wait=true&timeout=30000&consumerGroup=charger&subscriptionMode=new",
		"batch=100&partitions=3", "autoAck=true", "subscriptionFrom=now",
		"subscriptionFrom=2026-04-26T10:59:28.267966Z&subscriptionMode=all",
		"batch=abc&timeout=-5&wait=maybe", "batch=%zz", "consumerGroup=__QUEUE_MODE__&leaseSeconds=30",
		"consumerGroup=\xff", "consumerGroup=a%00b",
	} {
		f.Add(q, false)
		f.Add(q, true)
	}
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, query string, partitionRoute bool) {
		target := "/api/v1/pop/queue/orders"
		if partitionRoute {
			target += "/partition/cust-42"
		}
		r.fb.reset()
		req := httptest.NewRequest("GET", target, nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		r.api.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
			t.Fatalf("query %q: status %d body %q, want the empty pop (204, no body)", query, rec.Code, rec.Body.String())
		}
		pops := r.fb.Pops()
		if request.CheckName("consumerGroup", req.URL.Query().Get("consumerGroup")) != nil {
			// A group no state can key (NUL, too long, not UTF-8) claims
			// nothing: the pop answers empty without reaching the backend.
			if len(pops) != 0 {
				t.Fatalf("query %q: an unkeyable group reached the backend", query)
			}
			return
		}
		if len(pops) != 1 {
			t.Fatalf("query %q: %d Pop calls", query, len(pops))
		}
		in := pops[0].In
		if in.Batch < 1 || in.Batch > request.MaxPopBatch || in.Partitions < 1 || in.Partitions > 1000 {
			t.Fatalf("query %q: batch %d, partitions %d", query, in.Batch, in.Partitions)
		}
		if partitionRoute && (in.Partitions != 1 || !in.HasPartition) {
			t.Fatalf("query %q: partition route with partitions %d", query, in.Partitions)
		}
		if pops[0].Wait > request.MaxPopWait {
			t.Fatalf("query %q: wait %v past the ceiling", query, pops[0].Wait)
		}
		if in.ConsumerGroup == command.QueueModeGroup {
			t.Fatalf("query %q: the reserved group reached the backend by name", query)
		}
	})
}
