package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// A partition id the way a client echoes it back.
const pid = "0198a6b2-7c1e-7d4a-9e3f-2b1c0d9e8f7a"

// badCase is one malformed request and what the API must answer.
type badCase struct {
	name   string
	method string
	path   string
	body   string
	status int
	err    string // substring of the body's "error"; "" = any non-empty string
	reason string // exact "reason" (KV envelope); "" = not checked
	detail string // substring of "detail"; "" = not checked
}

// runBadCases sends each case through h. Every 4xx must carry the error
// envelope and must not have reached Apply: bad input changes nothing.
func runBadCases(t *testing.T, fb *fakeBackend, h http.Handler, cases []badCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fb.reset()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			rec := serve(h, method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Errorf("%s %s %.200q: status %d, want %d; body %.300s", method, tc.path, tc.body, rec.Code, tc.status, rec.Body.String())
			}
			if rec.Code < 400 || rec.Code >= 500 {
				return
			}
			if n := len(fb.Applies()); n != 0 {
				t.Errorf("a %d answer reached Apply %d time(s): bad input must change nothing", rec.Code, n)
			}
			body := errorEnvelope(t, rec)
			if msg := body["error"].(string); !strings.Contains(msg, tc.err) {
				t.Errorf("error = %q, want it to contain %q", msg, tc.err)
			}
			if tc.reason != "" && body["reason"] != tc.reason {
				t.Errorf("reason = %v, want %q (body %s)", body["reason"], tc.reason, rec.Body.String())
			}
			if tc.detail != "" {
				if d, _ := body["detail"].(string); !strings.Contains(d, tc.detail) {
					t.Errorf("detail = %q, want it to contain %q", d, tc.detail)
				}
			}
		})
	}
}

func newFixture(t *testing.T, maxBody int64) (*fakeBackend, *API) {
	t.Helper()
	fb := newFakeBackend(t)
	return fb, newTestAPI(fb, maxBody)
}

// postRoutes is every POST (and the KV PUT) route that reads a JSON body.
var postRoutes = []struct{ name, method, path string }{
	{"push", "POST", "/api/v1/push"},
	{"ack", "POST", "/api/v1/ack"},
	{"ack batch", "POST", "/api/v1/ack/batch"},
	{"transaction", "POST", "/api/v1/transaction"},
	{"configure", "POST", "/api/v1/configure"},
	{"lease extend", "POST", "/api/v1/lease/lease-1/extend"},
	{"kv batch", "POST", "/api/v1/kv"},
	{"kv put path", "PUT", "/api/v1/kv/charges/charge:ORD-1"},
}

// TestBodyParseFailuresOnEveryRoute: spec §1.1, "Body parse failures give
// 400 ... This applies to every POST route that reads a body, including
// /lease/:id/extend".
func TestBodyParseFailuresOnEveryRoute(t *testing.T) {
	fb, api := newFixture(t, 0)
	bodies := []struct{ name, body, err string }{
		{"empty", "", "Empty request body"},
		{"whitespace only", " \n\t\r ", "Empty request body"},
		{"truncated object", "{", "Invalid JSON: "},
		{"missing value", `{"a":}`, "Invalid JSON: "},
		{"trailing comma", `{"a":1,}`, "Invalid JSON: "},
		{"trailing garbage", `{} x`, "Invalid JSON: "},
		{"two documents", `{}{}`, "Invalid JSON: "},
		{"single quotes", `{'a':1}`, "Invalid JSON: "},
		{"bare word", `items`, "Invalid JSON: "},
		{"truncated array", `[{"op":"get","ns":"a","key":"k"},`, "Invalid JSON: "},
		{"unterminated string", `{"a":"b`, "Invalid JSON: "},
		{"string body", `"hello"`, ""},
		{"number body", `42`, ""},
		{"null body", `null`, ""},
		{"bool body", `true`, ""},
		{"empty array body", `[]`, ""},
	}
	var cases []badCase
	for _, r := range postRoutes {
		for _, b := range bodies {
			cases = append(cases, badCase{name: r.name + "/" + b.name, method: r.method, path: r.path,
				body: b.body, status: 400, err: b.err})
		}
	}
	runBadCases(t, fb, api, cases)
}

// TestOversizedBodies: a body past MaxBodyBytes is a 413 with the error
// envelope, on every route that reads one, and nothing is applied.
func TestOversizedBodies(t *testing.T) {
	fb, api := newFixture(t, 1024)
	big := strings.Repeat("x", 2048)
	cases := []badCase{
		{name: "push", path: "/api/v1/push", body: `{"items":[{"queue":"q","payload":"` + big + `"}]}`},
		{name: "ack", path: "/api/v1/ack", body: `{"transactionId":"` + big + `","partitionId":"` + pid + `"}`},
		{name: "ack batch", path: "/api/v1/ack/batch", body: `{"acknowledgments":[{"transactionId":"` + big + `","partitionId":"` + pid + `"}]}`},
		{name: "transaction", path: "/api/v1/transaction", body: `{"operations":[{"type":"push","queue":"q","payload":"` + big + `"}]}`},
		{name: "configure", path: "/api/v1/configure", body: `{"queue":"q","namespace":"` + big + `"}`},
		{name: "lease extend", path: "/api/v1/lease/l/extend", body: `{"seconds":60,"pad":"` + big + `"}`},
		{name: "kv batch", path: "/api/v1/kv", body: `{"operations":[{"op":"put","ns":"a","key":"k","forever":true,"value":"` + big + `"}]}`},
		{name: "kv bare array", path: "/api/v1/kv", body: `[{"op":"put","ns":"a","key":"k","forever":true,"value":"` + big + `"}]`},
		{name: "kv put path", method: "PUT", path: "/api/v1/kv/a/k", body: `{"forever":true,"value":"` + big + `"}`},
		{name: "kv delete path", method: "DELETE", path: "/api/v1/kv/a/k", body: `{"pad":"` + big + `"}`},
	}
	for i := range cases {
		cases[i].status = http.StatusRequestEntityTooLarge
	}
	runBadCases(t, fb, api, cases)
}

// TestPushRejectsMalformed: spec §4.2.
func TestPushRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	item := func(fields string) string { return `{"items":[` + fields + `]}` }
	cases := []badCase{
		{name: "items missing", body: `{}`, err: "items array is required"},
		{name: "items null", body: `{"items":null}`, err: "items array is required"},
		{name: "items object", body: `{"items":{"queue":"q"}}`, err: "items array is required"},
		{name: "items string", body: `{"items":"q"}`, err: "items array is required"},
		{name: "items number", body: `{"items":1}`, err: "items array is required"},
		{name: "items misspelt", body: `{"item":[{"queue":"q"}]}`, err: "items array is required"},
		{name: "item not object", body: item(`5`), err: ""},
		{name: "item null", body: item(`null`), err: ""},
		{name: "item array", body: item(`["q"]`), err: ""},
		{name: "queue missing", body: item(`{"payload":1}`), err: "Queue must be a string"},
		{name: "queue null", body: item(`{"queue":null}`), err: "Queue must be a string"},
		{name: "queue number", body: item(`{"queue":7}`), err: "Queue must be a string"},
		{name: "queue array", body: item(`{"queue":["orders"]}`), err: "Queue must be a string"},
		{name: "queue object", body: item(`{"queue":{"name":"orders"}}`), err: "Queue must be a string"},
		{name: "queue bool", body: item(`{"queue":true}`), err: "Queue must be a string"},
		{name: "partition number", body: item(`{"queue":"q","partition":42}`), err: "Partition must be a string"},
		{name: "partition bool", body: item(`{"queue":"q","partition":false}`), err: "Partition must be a string"},
		{name: "partition object", body: item(`{"queue":"q","partition":{}}`), err: "Partition must be a string"},
		{name: "transactionId number", body: item(`{"queue":"q","transactionId":1}`), err: "TransactionId must be a string"},
		{name: "transactionId array", body: item(`{"queue":"q","transactionId":["a"]}`), err: "TransactionId must be a string"},
		{name: "traceId number", body: item(`{"queue":"q","traceId":5}`), err: "TraceId must be a string"},
		{name: "traceId object", body: item(`{"queue":"q","traceId":{}}`), err: "TraceId must be a string"},
		{name: "traceId not a uuid", body: item(`{"queue":"q","traceId":"not-a-uuid"}`), err: "TraceId"},
		{name: "traceId empty", body: item(`{"queue":"q","traceId":""}`), err: "TraceId"},
		{name: "traceId uuid with junk", body: item(`{"queue":"q","traceId":"019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40eZ"}`), err: "TraceId"},
		{name: "traceId braced", body: item(`{"queue":"q","traceId":"{019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40e1}"}`), err: "TraceId"},
		{name: "traceId urn", body: item(`{"queue":"q","traceId":"urn:uuid:019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40e1"}`), err: "TraceId"},
		// Checked in order (spec §4.2): the first bad field names the error.
		{name: "order queue before partition", body: item(`{"queue":1,"partition":1,"transactionId":1,"traceId":1}`), err: "Queue must be a string"},
		{name: "order partition before transactionId", body: item(`{"queue":"q","partition":1,"transactionId":1,"traceId":1}`), err: "Partition must be a string"},
		{name: "order transactionId before traceId", body: item(`{"queue":"q","transactionId":1,"traceId":1}`), err: "TransactionId must be a string"},
		{name: "second item bad refuses all", body: item(`{"queue":"q","payload":1},{"queue":2}`), err: "Queue must be a string"},
		{name: "last of many bad", body: item(strings.Repeat(`{"queue":"q"},`, 50) + `{"queue":"q","partition":[]}`), err: "Partition must be a string"},
		{name: "queue with NUL", body: item(`{"queue":"or\u0000ders"}`), err: "NUL"},
		{name: "queue only NUL", body: item(`{"queue":"\u0000"}`), err: "NUL"},
		{name: "partition with NUL", body: item(`{"queue":"q","partition":"p\u0000"}`), err: "NUL"},
		{name: "queue too long", body: item(`{"queue":"` + strings.Repeat("q", 513) + `"}`), err: "too long"},
		{name: "partition too long", body: item(`{"queue":"q","partition":"` + strings.Repeat("p", 513) + `"}`), err: "too long"},
		{name: "transactionId too long", body: item(`{"queue":"q","transactionId":"` + strings.Repeat("t", 1025) + `"}`), err: "too long"},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/push", nameStatus(cases[i].name)
	}
	runBadCases(t, fb, api, cases)
}

// TestAckRejectsMalformed: spec §4.4, POST /ack.
func TestAckRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	const needTxn = "transactionId is required"
	const needPid = "partitionId is required to ensure message uniqueness"
	cases := []badCase{
		{name: "empty object", body: `{}`, err: needTxn},
		{name: "transactionId missing", body: `{"partitionId":"` + pid + `"}`, err: needTxn},
		{name: "transactionId null", body: `{"transactionId":null,"partitionId":"` + pid + `"}`, err: needTxn},
		{name: "transactionId number", body: `{"transactionId":5,"partitionId":"` + pid + `"}`, err: needTxn},
		{name: "transactionId empty", body: `{"transactionId":"","partitionId":"` + pid + `"}`, err: needTxn},
		{name: "transactionId array", body: `{"transactionId":["t"],"partitionId":"` + pid + `"}`, err: needTxn},
		{name: "partitionId missing", body: `{"transactionId":"t"}`, err: needPid},
		{name: "partitionId null", body: `{"transactionId":"t","partitionId":null}`, err: needPid},
		{name: "partitionId number", body: `{"transactionId":"t","partitionId":12}`, err: needPid},
		{name: "partitionId empty", body: `{"transactionId":"t","partitionId":""}`, err: needPid},
		{name: "partitionId object", body: `{"transactionId":"t","partitionId":{}}`, err: needPid},
		{name: "both missing names transactionId", body: `{"status":"completed"}`, err: needTxn},
		{name: "consumerGroup number", body: `{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":1}`, err: "consumerGroup"},
		{name: "consumerGroup with NUL", body: `{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":"g\u0000"}`, err: "NUL"},
		{name: "consumerGroup too long", body: `{"transactionId":"t","partitionId":"` + pid + `","consumerGroup":"` + strings.Repeat("g", 513) + `"}`, err: "too long"},
		{name: "leaseId number", body: `{"transactionId":"t","partitionId":"` + pid + `","leaseId":1}`, err: "leaseId"},
		{name: "error number", body: `{"transactionId":"t","partitionId":"` + pid + `","status":"failed","error":404}`, err: "error"},
		{name: "acknowledgments sent to single route", body: `{"acknowledgments":[{"transactionId":"t","partitionId":"` + pid + `"}]}`, err: needTxn},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/ack", nameStatus(cases[i].name)
	}
	runBadCases(t, fb, api, cases)
}

// TestAckBatchRejectsMalformed: spec §4.4, POST /ack/batch.
func TestAckBatchRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	const needArr = "acknowledgments array is required"
	const needTxn = "Each acknowledgment must have a valid transactionId string"
	const needPid = "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"
	ok := `{"transactionId":"t1","partitionId":"` + pid + `"}`
	cases := []badCase{
		{name: "acknowledgments missing", body: `{}`, err: needArr},
		{name: "acknowledgments null", body: `{"acknowledgments":null}`, err: needArr},
		{name: "acknowledgments object", body: `{"acknowledgments":` + ok + `}`, err: needArr},
		{name: "acknowledgments string", body: `{"acknowledgments":"t1"}`, err: needArr},
		{name: "acknowledgments number", body: `{"acknowledgments":3}`, err: needArr},
		{name: "item missing transactionId", body: `{"acknowledgments":[{"partitionId":"` + pid + `"}]}`, err: needTxn},
		{name: "item transactionId number", body: `{"acknowledgments":[{"transactionId":1,"partitionId":"` + pid + `"}]}`, err: needTxn},
		{name: "item transactionId empty", body: `{"acknowledgments":[{"transactionId":"","partitionId":"` + pid + `"}]}`, err: needTxn},
		{name: "item missing partitionId", body: `{"acknowledgments":[{"transactionId":"t1"}]}`, err: needPid},
		{name: "item partitionId number", body: `{"acknowledgments":[{"transactionId":"t1","partitionId":7}]}`, err: needPid},
		{name: "item partitionId null", body: `{"acknowledgments":[{"transactionId":"t1","partitionId":null}]}`, err: needPid},
		{name: "good then bad refuses whole batch", body: `{"acknowledgments":[` + ok + `,{"transactionId":"t2"}]}`, err: needPid},
		{name: "bad after many good", body: `{"acknowledgments":[` + strings.Repeat(ok+",", 40) + `{}]}`, err: needTxn},
		{name: "item not an object", body: `{"acknowledgments":[5]}`, err: ""},
		{name: "item null", body: `{"acknowledgments":[null]}`, err: ""},
		{name: "top-level consumerGroup number", body: `{"consumerGroup":1,"acknowledgments":[` + ok + `]}`, err: "consumerGroup"},
		{name: "top-level consumerGroup with NUL", body: `{"consumerGroup":"a\u0000b","acknowledgments":[` + ok + `]}`, err: "NUL"},
		{name: "item leaseId number", body: `{"acknowledgments":[{"transactionId":"t1","partitionId":"` + pid + `","leaseId":[]}]}`, err: "leaseId"},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/ack/batch", 400
	}
	runBadCases(t, fb, api, cases)
}

// TestTransactionRejectsMalformed: spec §4.5.
func TestTransactionRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	ack := `{"type":"ack","transactionId":"order-1","partitionId":"` + pid + `","status":"completed"}`
	put := func(extra string) string {
		return `{"op":"put","ns":"charges","key":"k","value":{"a":1}` + extra + `}`
	}
	cases := []badCase{
		{name: "operations missing", body: `{}`, err: "operations array required"},
		{name: "operations number", body: `{"operations":5}`, err: "operations array required"},
		{name: "operations object", body: `{"operations":` + ack + `}`, err: "operations array required"},
		{name: "operations string", body: `{"operations":"ack"}`, err: "operations array required"},
		{name: "operations null", body: `{"operations":null}`, err: "operations array"},
		{name: "operations empty", body: `{"operations":[]}`, err: "operations array cannot be empty"},
		{name: "operations empty kv empty", body: `{"operations":[],"kv":[]}`, err: "operations array cannot be empty"},
		{name: "operations empty kv null", body: `{"operations":[],"kv":null}`, err: "operations array cannot be empty"},
		{name: "kv type in operations", body: `{"operations":[{"type":"kv","op":"get","ns":"a","key":"k"}]}`, err: "kv"},
		{name: "kv type in operations after ack", body: `{"operations":[` + ack + `,{"type":"kv","op":"put","ns":"a","key":"k","value":1,"forever":true}]}`, err: "kv"},
		{name: "getPrefix in kv", body: `{"operations":[],"kv":[{"op":"getPrefix","ns":"a","prefix":"p"}]}`, err: "getPrefix is not allowed"},
		{name: "getPrefix in kv beside ack", body: `{"operations":[` + ack + `],"kv":[{"op":"getPrefix","ns":"a","prefix":"p"}]}`, err: "getPrefix is not allowed"},
		{name: "kv not array", body: `{"operations":[` + ack + `],"kv":{"op":"get","ns":"a","key":"k"}}`, err: "kv must be an array"},
		{name: "kv op not object", body: `{"operations":[],"kv":[1]}`, err: "kv_bad_request"},
		{name: "kv write without expiry", body: `{"operations":[],"kv":[` + put("") + `]}`, err: "kv_bad_request", reason: "kv_expiry_not_specified", detail: "op at index 0"},
		{name: "kv write with both expiries", body: `{"operations":[],"kv":[` + put(`,"ttlSeconds":60,"forever":true`) + `]}`, reason: "kv_expiry_not_specified"},
		{name: "kv bad namespace", body: `{"operations":[],"kv":[{"op":"get","ns":"Charges","key":"k"}]}`, reason: "kv_bad_namespace"},
		{name: "kv duplicate write", body: `{"operations":[],"kv":[` + put(`,"forever":true`) + `,{"op":"delete","ns":"charges","key":"k"}]}`, err: "kv_bad_request"},
		{name: "kv putIfAbsent with expect", body: `{"operations":[],"kv":[{"op":"putIfAbsent","ns":"a","key":"k","value":1,"forever":true,"expect":2}]}`, err: "kv_bad_request"},
		{name: "operation not object", body: `{"operations":[5]}`, err: ""},
		{name: "operation null", body: `{"operations":[null]}`, err: ""},
		{name: "ack op without transactionId", body: `{"operations":[{"type":"ack","partitionId":"` + pid + `"}]}`, err: "transactionId is required"},
		{name: "ack op without partitionId", body: `{"operations":[{"type":"ack","transactionId":"t"}]}`, err: "partitionId is required to ensure message uniqueness"},
		{name: "ack op consumerGroup number", body: `{"operations":[{"type":"ack","transactionId":"t","partitionId":"` + pid + `","consumerGroup":9}]}`, err: "consumerGroup"},
		{name: "push op items not array", body: `{"operations":[{"type":"push","items":"x"}]}`, err: "items array is required"},
		{name: "push op items null", body: `{"operations":[{"type":"push","items":null}]}`, err: "items array is required"},
		{name: "push op item queue number", body: `{"operations":[{"type":"push","items":[{"queue":1}]}]}`, err: "Queue must be a string"},
		{name: "flat push op queue missing", body: `{"operations":[{"type":"push","payload":{}}]}`, err: "Queue must be a string"},
		{name: "flat push op partition number", body: `{"operations":[{"type":"push","queue":"q","partition":1}]}`, err: "Partition must be a string"},
		{name: "push op bad traceId", body: `{"operations":[{"type":"push","queue":"q","traceId":"nope"}]}`, err: "TraceId"},
		{name: "push op queue NUL", body: `{"operations":[{"type":"push","queue":"q\u0000"}]}`, err: "NUL"},
		{name: "requiredLeases string", body: `{"operations":[` + ack + `],"requiredLeases":"l1"}`, err: "requiredLeases"},
		{name: "requiredLeases with number", body: `{"operations":[` + ack + `],"requiredLeases":["l1",2]}`, err: "requiredLeases"},
		{name: "timers root", body: `{"operations":[` + ack + `],"timers":[{"queue":"q","key":"k"}]}`, err: "timers_bad_request"},
		{name: "timer op", body: `{"operations":[{"type":"timer","queue":"q"}]}`, err: `root "timers" array`},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/transaction", 400
	}
	// A KV value past 64 KiB inside a transaction is a 413 too (spec §4.7).
	cases = append(cases, badCase{name: "kv value too large", path: "/api/v1/transaction", status: 413,
		body: `{"operations":[],"kv":[{"op":"put","ns":"a","key":"k","forever":true,"value":"` + strings.Repeat("v", 70000) + `"}]}`})
	runBadCases(t, fb, api, cases)
}

// TestConfigureRejectsMalformed: spec §4.1.
func TestConfigureRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	opt := func(o string) string { return `{"queue":"orders","options":` + o + `}` }
	cases := []badCase{
		{name: "queue missing", body: `{}`, err: "queue is required"},
		{name: "queue missing with options", body: `{"options":{"leaseTime":30}}`, err: "queue is required"},
		{name: "queue null", body: `{"queue":null}`, err: "queue is required"},
		{name: "queue number", body: `{"queue":1}`, err: "queue is required"},
		{name: "queue array", body: `{"queue":["orders"]}`, err: "queue is required"},
		{name: "queue object", body: `{"queue":{}}`, err: "queue is required"},
		{name: "queue bool", body: `{"queue":true}`, err: "queue is required"},
		{name: "queue with NUL", body: `{"queue":"a\u0000b"}`, err: "NUL"},
		{name: "queue too long", body: `{"queue":"` + strings.Repeat("q", 513) + `"}`, err: "too long"},
		{name: "namespace number", body: `{"queue":"orders","namespace":5}`, err: "namespace"},
		{name: "namespace object", body: `{"queue":"orders","namespace":{}}`, err: "namespace"},
		{name: "namespace bool", body: `{"queue":"orders","namespace":false}`, err: "namespace"},
		{name: "task number", body: `{"queue":"orders","task":5}`, err: "task"},
		{name: "options string", body: opt(`"fast"`), err: "options"},
		{name: "options array", body: opt(`[]`), err: "options"},
		{name: "options number", body: opt(`1`), err: "options"},
		{name: "leaseTime string", body: opt(`{"leaseTime":"30"}`), err: "leaseTime"},
		{name: "leaseTime fraction", body: opt(`{"leaseTime":1.5}`), err: "leaseTime"},
		{name: "leaseTime negative", body: opt(`{"leaseTime":-1}`), err: "leaseTime"},
		{name: "leaseTime bool", body: opt(`{"leaseTime":true}`), err: "leaseTime"},
		{name: "leaseTime object", body: opt(`{"leaseTime":{}}`), err: "leaseTime"},
		{name: "leaseTime beyond float precision", body: opt(`{"leaseTime":1e300}`), err: "leaseTime"},
		{name: "retryLimit string", body: opt(`{"retryLimit":"3"}`), err: "retryLimit"},
		{name: "ttl array", body: opt(`{"ttl":[3600]}`), err: "ttl"},
		{name: "maxSize negative", body: opt(`{"maxSize":-10}`), err: "maxSize"},
		{name: "retentionEnabled string", body: opt(`{"retentionEnabled":"yes"}`), err: "retentionEnabled"},
		{name: "retentionEnabled number", body: opt(`{"retentionEnabled":1}`), err: "retentionEnabled"},
		{name: "encryptionEnabled string", body: opt(`{"encryptionEnabled":"true"}`), err: "encryptionEnabled"},
		{name: "deadLetterQueue number", body: opt(`{"deadLetterQueue":0}`), err: "deadLetterQueue"},
		{name: "one bad among good", body: opt(`{"leaseTime":30,"retryLimit":5,"priority":"high"}`), err: "priority"},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/configure", nameStatus(cases[i].name)
	}
	runBadCases(t, fb, api, cases)
}

// TestLeaseExtendRejectsMalformed: spec §4.6 (and §1.1: the body may be {}
// but not empty).
func TestLeaseExtendRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	cases := []badCase{
		{name: "empty body", body: ``, err: "Empty request body"},
		{name: "invalid json", body: `{"seconds":`, err: "Invalid JSON: "},
		{name: "array body", body: `[60]`},
		{name: "number body", body: `60`},
		{name: "seconds string", body: `{"seconds":"60"}`, err: "seconds"},
		{name: "seconds word", body: `{"seconds":"abc"}`, err: "seconds"},
		{name: "seconds zero", body: `{"seconds":0}`, err: "seconds"},
		{name: "seconds negative", body: `{"seconds":-5}`, err: "seconds"},
		{name: "seconds fraction", body: `{"seconds":1.5}`, err: "seconds"},
		{name: "seconds bool", body: `{"seconds":true}`, err: "seconds"},
		{name: "seconds array", body: `{"seconds":[60]}`, err: "seconds"},
		{name: "seconds huge", body: `{"seconds":9223372036854775807}`, err: "seconds"},
		{name: "seconds past a week", body: `{"seconds":604801}`, err: "seconds"},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/lease/lease-1/extend", 400
	}
	runBadCases(t, fb, api, cases)
}

// TestKVBatchRejectsMalformed: spec §4.7, POST /api/v1/kv.
func TestKVBatchRejectsMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	ops := func(list ...string) string { return `{"operations":[` + strings.Join(list, ",") + `]}` }
	const get = `{"op":"get","ns":"a","key":"k"}`
	tooMany := make([]string, 257)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf(`{"op":"get","ns":"a","key":"k%d"}`, i)
	}
	cases := []badCase{
		// Expiry: exactly one of ttlSeconds (integer > 0) or forever:true.
		{name: "put without expiry", body: ops(`{"op":"put","ns":"a","key":"k","value":1}`), reason: "kv_expiry_not_specified", detail: "op at index 0: "},
		{name: "expiry error names its index", body: ops(get, `{"op":"put","ns":"a","key":"k","value":1}`), reason: "kv_expiry_not_specified", detail: "op at index 1: "},
		{name: "put with both expiries", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":60,"forever":true}`), reason: "kv_expiry_not_specified"},
		{name: "put forever false", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":false}`), reason: "kv_expiry_not_specified"},
		{name: "put ttl zero", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":0}`), reason: "kv_expiry_not_specified"},
		{name: "put ttl negative", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":-60}`), reason: "kv_expiry_not_specified"},
		{name: "put ttl string", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":"60"}`), reason: "kv_expiry_not_specified"},
		{name: "put ttl fraction", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":0.5}`), reason: "kv_expiry_not_specified"},
		{name: "put ttl null", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":null}`), reason: "kv_expiry_not_specified"},
		{name: "putIfAbsent without expiry", body: ops(`{"op":"putIfAbsent","ns":"a","key":"k","value":1}`), reason: "kv_expiry_not_specified"},
		{name: "incr without expiry", body: ops(`{"op":"incr","ns":"a","key":"k","delta":1}`), reason: "kv_expiry_not_specified"},
		{name: "cas without expiry", body: ops(`{"op":"cas","ns":"a","key":"k","value":1,"expect":3}`), reason: "kv_expiry_not_specified"},
		{name: "forever string", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":"true"}`)},
		// Namespace.
		{name: "ns uppercase", body: ops(`{"op":"get","ns":"Charges","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns empty", body: ops(`{"op":"get","ns":"","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns missing", body: ops(`{"op":"get","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns number", body: ops(`{"op":"get","ns":5,"key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns leading dash", body: ops(`{"op":"get","ns":"-a","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns leading dot", body: ops(`{"op":"get","ns":".a","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns with slash", body: ops(`{"op":"get","ns":"a/b","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns with NUL", body: ops(`{"op":"get","ns":"a\u0000","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns with trailing newline", body: ops(`{"op":"get","ns":"a\n","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns 65 chars", body: ops(`{"op":"get","ns":"` + strings.Repeat("a", 65) + `","key":"k"}`), reason: "kv_bad_namespace"},
		{name: "ns bad on write", body: ops(`{"op":"put","ns":"A","key":"k","value":1,"forever":true}`), reason: "kv_bad_namespace"},
		// Preconditions.
		{name: "putIfAbsent expect 3", body: ops(`{"op":"putIfAbsent","ns":"a","key":"k","value":1,"forever":true,"expect":3}`), reason: "kv_bad_expect"},
		{name: "cas without expect", body: ops(`{"op":"cas","ns":"a","key":"k","value":1,"forever":true}`), reason: "kv_bad_expect"},
		{name: "cas expect null", body: ops(`{"op":"cas","ns":"a","key":"k","value":1,"forever":true,"expect":null}`), reason: "kv_bad_expect"},
		{name: "expect negative", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":true,"expect":-1}`), reason: "kv_bad_expect"},
		{name: "expect string", body: ops(`{"op":"delete","ns":"a","key":"k","expect":"1"}`), reason: "kv_bad_expect"},
		{name: "expect fraction", body: ops(`{"op":"delete","ns":"a","key":"k","expect":1.5}`), reason: "kv_bad_expect"},
		{name: "required string", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":true,"required":"yes"}`)},
		// One write per key per call.
		{name: "duplicate put", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":true}`, `{"op":"put","ns":"a","key":"k","value":2,"forever":true}`), reason: "kv_duplicate_key_in_call"},
		{name: "put then delete same key", body: ops(`{"op":"put","ns":"a","key":"k","value":1,"forever":true}`, `{"op":"delete","ns":"a","key":"k"}`), reason: "kv_duplicate_key_in_call"},
		{name: "incr then putIfAbsent same key", body: ops(`{"op":"incr","ns":"a","key":"k","forever":true}`, `{"op":"putIfAbsent","ns":"a","key":"k","value":0,"forever":true}`), reason: "kv_duplicate_key_in_call"},
		{name: "duplicate write in bare array", body: `[{"op":"delete","ns":"a","key":"k"},{"op":"delete","ns":"a","key":"k"}]`, reason: "kv_duplicate_key_in_call"},
		// Op shape.
		{name: "op unknown", body: ops(`{"op":"frob","ns":"a","key":"k"}`), reason: "kv_bad_op"},
		{name: "op missing", body: ops(`{"ns":"a","key":"k"}`), reason: "kv_bad_op"},
		{name: "op number", body: ops(`{"op":1,"ns":"a","key":"k"}`), reason: "kv_bad_op"},
		{name: "op wrong case", body: ops(`{"op":"PUT","ns":"a","key":"k","value":1,"forever":true}`), reason: "kv_bad_op"},
		{name: "op element not object", body: ops(`"get"`)},
		{name: "op element null", body: ops(`null`)},
		{name: "key missing", body: ops(`{"op":"get","ns":"a"}`), reason: "kv_bad_key"},
		{name: "key empty", body: ops(`{"op":"get","ns":"a","key":""}`), reason: "kv_bad_key"},
		{name: "key number", body: ops(`{"op":"get","ns":"a","key":1}`), reason: "kv_bad_key"},
		{name: "key too long", body: ops(`{"op":"get","ns":"a","key":"` + strings.Repeat("k", 513) + `"}`), reason: "kv_bad_key"},
		{name: "getMany keys empty", body: ops(`{"op":"getMany","ns":"a","keys":[]}`), reason: "kv_bad_key"},
		{name: "getMany keys missing", body: ops(`{"op":"getMany","ns":"a"}`), reason: "kv_bad_key"},
		{name: "getMany keys not strings", body: ops(`{"op":"getMany","ns":"a","keys":[1,2]}`), reason: "kv_bad_key"},
		{name: "getPrefix prefix empty", body: ops(`{"op":"getPrefix","ns":"a","prefix":""}`), reason: "kv_prefix_required"},
		{name: "getPrefix limit string", body: ops(`{"op":"getPrefix","ns":"a","prefix":"p","limit":"10"}`), reason: "kv_bad_limit"},
		{name: "put value missing", body: ops(`{"op":"put","ns":"a","key":"k","forever":true}`), reason: "kv_bad_value"},
		{name: "incr delta fraction", body: ops(`{"op":"incr","ns":"a","key":"k","delta":1.5,"forever":true}`), reason: "kv_bad_delta"},
		{name: "incr delta string", body: ops(`{"op":"incr","ns":"a","key":"k","delta":"1","forever":true}`), reason: "kv_bad_delta"},
		{name: "incr min string", body: ops(`{"op":"incr","ns":"a","key":"k","min":"0","forever":true}`)},
		// Envelope.
		{name: "operations missing", body: `{}`},
		{name: "operations object", body: `{"operations":` + get + `}`},
		{name: "operations number", body: `{"operations":1}`},
		{name: "operations empty", body: `{"operations":[]}`},
		{name: "bare array empty", body: `[]`},
		{name: "bare array of numbers", body: `[1,2]`},
		{name: "too many ops", body: ops(tooMany...), reason: "kv_too_many_ops"},
	}
	for i := range cases {
		cases[i].path, cases[i].status = "/api/v1/kv", 400
		if cases[i].err == "" && cases[i].reason != "" {
			cases[i].err = "kv_bad_request" // the KV envelope (spec §1.1, §4.7)
		}
	}
	// Value size ceiling: 64 KiB, a larger value is a 413 (spec §4.7).
	big := `"` + strings.Repeat("v", 70000) + `"`
	cases = append(cases,
		badCase{name: "value over 64KiB", path: "/api/v1/kv", status: 413,
			body: ops(`{"op":"put","ns":"a","key":"k","forever":true,"value":` + big + `}`)},
		badCase{name: "value over 64KiB as object", path: "/api/v1/kv", status: 413,
			body: ops(`{"op":"putIfAbsent","ns":"a","key":"k","ttlSeconds":60,"value":{"blob":` + big + `}}`)},
		badCase{name: "value over 64KiB second op", path: "/api/v1/kv", status: 413,
			body: ops(`{"op":"put","ns":"a","key":"k1","forever":true,"value":1}`, `{"op":"cas","ns":"a","key":"k2","expect":4,"forever":true,"value":`+big+`}`)},
	)
	runBadCases(t, fb, api, cases)
}

// TestKVPathRoutesRejectMalformed: spec §4.7 path routes.
func TestKVPathRoutesRejectMalformed(t *testing.T) {
	fb, api := newFixture(t, 0)
	const p = "/api/v1/kv/charges/charge:ORD-1"
	cases := []badCase{
		{name: "put body with op", method: "PUT", path: p, body: `{"op":"put","value":1,"forever":true}`, err: "kv_bad_request"},
		{name: "put body with ns", method: "PUT", path: p, body: `{"ns":"charges","value":1,"forever":true}`, err: "kv_bad_request"},
		{name: "put body with key", method: "PUT", path: p, body: `{"key":"charge:ORD-1","value":1,"forever":true}`, err: "kv_bad_request"},
		{name: "put body with null op", method: "PUT", path: p, body: `{"op":null,"value":1,"forever":true}`, err: "kv_bad_request"},
		{name: "put without expiry", method: "PUT", path: p, body: `{"value":{"chargeId":"ch_1"}}`, err: "kv_bad_request", reason: "kv_expiry_not_specified"},
		{name: "put with both expiries", method: "PUT", path: p, body: `{"value":1,"ttlSeconds":5,"forever":true}`, reason: "kv_expiry_not_specified"},
		{name: "put without value", method: "PUT", path: p, body: `{"forever":true}`, reason: "kv_bad_value"},
		{name: "put bad namespace", method: "PUT", path: "/api/v1/kv/Charges/k", body: `{"value":1,"forever":true}`, reason: "kv_bad_namespace"},
		{name: "put namespace with space", method: "PUT", path: "/api/v1/kv/a%20b/k", body: `{"value":1,"forever":true}`, reason: "kv_bad_namespace"},
		{name: "put empty key", method: "PUT", path: "/api/v1/kv/charges/", body: `{"value":1,"forever":true}`, reason: "kv_bad_key"},
		{name: "put bad expect", method: "PUT", path: p, body: `{"value":1,"forever":true,"expect":"x"}`, reason: "kv_bad_expect"},
		{name: "put value too large", method: "PUT", path: p, status: 413, body: `{"forever":true,"value":"` + strings.Repeat("v", 70000) + `"}`},
		{name: "put array body", method: "PUT", path: p, body: `[{"value":1,"forever":true}]`},
		{name: "get bad namespace", method: "GET", path: "/api/v1/kv/UPPER/k", reason: "kv_bad_namespace"},
		{name: "get namespace too long", method: "GET", path: "/api/v1/kv/" + strings.Repeat("n", 65) + "/k", reason: "kv_bad_namespace"},
		{name: "get empty key", method: "GET", path: "/api/v1/kv/charges/", reason: "kv_bad_key"},
		{name: "delete invalid json", method: "DELETE", path: p, body: `{"expect":`, err: "Invalid JSON: "},
		{name: "delete array body", method: "DELETE", path: p, body: `[]`},
		{name: "delete body with op", method: "DELETE", path: p, body: `{"op":"delete"}`, err: "kv_bad_request"},
		{name: "delete body with key", method: "DELETE", path: p, body: `{"key":"other"}`, err: "kv_bad_request"},
		{name: "delete expect string", method: "DELETE", path: p, body: `{"expect":"3"}`, reason: "kv_bad_expect"},
		{name: "delete required string", method: "DELETE", path: p, body: `{"required":"yes"}`},
		{name: "delete bad namespace", method: "DELETE", path: "/api/v1/kv/_x/k", reason: "kv_bad_namespace"},
	}
	for i := range cases {
		if cases[i].status == 0 {
			cases[i].status = 400
		}
	}
	runBadCases(t, fb, api, cases)
	t.Run("bad GET never reads", func(t *testing.T) {
		fb.reset()
		serve(api, "GET", "/api/v1/kv/UPPER/k", "")
		if n := len(fb.Reads()); n != 0 {
			t.Errorf("a refused GET still read the state %d time(s)", n)
		}
	})
}

// TestAckUnknownStatus: spec §4.4, an unknown status is 200 with a refused
// item, error "invalid status", and nothing applied for it.
func TestAckUnknownStatus(t *testing.T) {
	fb, api := newFixture(t, 0)
	for _, status := range []string{`"bogus"`, `"COMPLETED"`, `""`, `5`, `{}`, `["failed"]`} {
		t.Run(status, func(t *testing.T) {
			fb.reset()
			rec := serve(api, "POST", "/api/v1/ack", `{"transactionId":"order-1","partitionId":"`+pid+`","status":`+status+`}`)
			if rec.Code != 200 {
				t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body.String())
			}
			var items []map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &items); err != nil || len(items) != 1 {
				t.Fatalf("want a one-item array, got %s (%v)", rec.Body.String(), err)
			}
			it := items[0]
			if it["success"] != false || it["error"] != "invalid status" || it["transactionId"] != "order-1" || it["index"] != 0.0 {
				t.Errorf("item = %v, want index 0, transactionId order-1, success false, error \"invalid status\"", it)
			}
			if n := len(fb.Applies()); n != 0 {
				t.Errorf("an ack with an unknown status reached Apply %d time(s)", n)
			}
		})
	}
}

// TestAckBatchUnknownStatusSkipsOnlyThatItem: the refused item gets its own
// verdict in place; the others are applied as one entry, in request order,
// under the top-level group (spec §4.4).
func TestAckBatchUnknownStatusSkipsOnlyThatItem(t *testing.T) {
	fb, api := newFixture(t, 0)
	body := `{"consumerGroup":"charger","acknowledgments":[
		{"transactionId":"t1","partitionId":"` + pid + `","status":"completed","consumerGroup":"other"},
		{"transactionId":"t2","partitionId":"` + pid + `","status":"maybe"},
		{"transactionId":"t3","partitionId":"` + pid + `","status":"failed","error":"boom"}]}`
	rec := serve(api, "POST", "/api/v1/ack/batch", body)
	if rec.Code != 200 {
		t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body.String())
	}
	var items []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &items); err != nil || len(items) != 3 {
		t.Fatalf("want a three-item array, got %s (%v)", rec.Body.String(), err)
	}
	for i, want := range []struct {
		txn     string
		success bool
	}{{"t1", true}, {"t2", false}, {"t3", true}} {
		if items[i]["index"] != float64(i) || items[i]["transactionId"] != want.txn || items[i]["success"] != want.success {
			t.Errorf("item %d = %v, want index %d transactionId %s success %v", i, items[i], i, want.txn, want.success)
		}
	}
	if items[1]["error"] != "invalid status" {
		t.Errorf("item 1 error = %v, want \"invalid status\"", items[1]["error"])
	}
	applies := fb.Applies()
	if len(applies) != 1 {
		t.Fatalf("Apply called %d times, want 1", len(applies))
	}
	sent := applies[0].GetAck().GetItems()
	if len(sent) != 2 || sent[0].TransactionId != "t1" || sent[1].TransactionId != "t3" {
		t.Fatalf("applied items = %v, want t1 and t3", sent)
	}
	for _, it := range sent {
		if it.ConsumerGroup != "charger" {
			t.Errorf("item %s group = %q, want the top-level \"charger\"", it.TransactionId, it.ConsumerGroup)
		}
	}

	t.Run("all unknown applies nothing", func(t *testing.T) {
		fb.reset()
		rec := serve(api, "POST", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"t1","partitionId":"`+pid+`","status":"x"}]}`)
		if rec.Code != 200 || len(fb.Applies()) != 0 {
			t.Errorf("status %d with %d Apply call(s); want 200 and none; body %s", rec.Code, len(fb.Applies()), rec.Body.String())
		}
	})
	t.Run("queue mode group and null group map to the implicit group", func(t *testing.T) {
		for _, g := range []string{`null`, `"__QUEUE_MODE__"`} {
			fb.reset()
			serve(api, "POST", "/api/v1/ack/batch", `{"consumerGroup":`+g+`,"acknowledgments":[{"transactionId":"t1","partitionId":"`+pid+`","consumerGroup":"x"}]}`)
			a := fb.Applies()
			if len(a) != 1 || a[0].GetAck().Items[0].ConsumerGroup != "" {
				t.Errorf("consumerGroup %s: applied %v, want one item in queue mode", g, a)
			}
		}
	})
}

// TestTransactionUnknownOpType: spec §4.5, "An unknown type rolls the whole
// transaction back: success:false, error:"Unknown operation type: x"". It is
// a verdict (200), and nothing may be applied.
func TestTransactionUnknownOpType(t *testing.T) {
	fb, api := newFixture(t, 0)
	ack := `{"type":"ack","transactionId":"order-1","partitionId":"` + pid + `"}`
	push := `{"type":"push","items":[{"queue":"receipts","payload":{"ok":true}}]}`
	for _, tc := range []struct{ name, body, want string }{
		{"alone", `{"operations":[{"type":"x"}]}`, "Unknown operation type: x"},
		{"after ack and push", `{"operations":[` + ack + `,` + push + `,{"type":"delete"}]}`, "Unknown operation type: delete"},
		{"before ack", `{"operations":[{"type":"Ack"},` + ack + `]}`, "Unknown operation type: Ack"},
		{"with kv", `{"operations":[{"type":"nack"}],"kv":[{"op":"put","ns":"a","key":"k","value":1,"forever":true}]}`, "Unknown operation type: nack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb.reset()
			rec := serve(api, "POST", "/api/v1/transaction", tc.body)
			if rec.Code != 200 {
				t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body.String())
			}
			var out map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if out["success"] != false || out["error"] != tc.want {
				t.Errorf("body %s, want success:false error %q", rec.Body.String(), tc.want)
			}
			if n := len(fb.Applies()); n != 0 {
				t.Errorf("Apply called %d time(s), want none", n)
			}
		})
	}
}

// TestValidRequestsReachBackend is the control for the "no Apply" checks:
// the spec's own examples get through, so a refusal above is the
// validator's doing and not a broken fixture.
func TestValidRequestsReachBackend(t *testing.T) {
	fb, api := newFixture(t, 0)
	cases := []struct {
		name, method, path, body string
		status, applies, reads   int
	}{
		{"push spec example", "POST", "/api/v1/push", `{"items":[{"queue":"orders","partition":"cust-42","payload":{"orderId":1},"transactionId":"order-1","traceId":"019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40e1"}]}`, 201, 1, 0},
		{"push empty items", "POST", "/api/v1/push", `{"items":[]}`, 201, 0, 0},
		{"push null partition and txn", "POST", "/api/v1/push", `{"items":[{"queue":"q","partition":null,"transactionId":null,"traceId":null}]}`, 201, 1, 0},
		{"ack spec example", "POST", "/api/v1/ack", `{"transactionId":"order-1","partitionId":"` + pid + `","consumerGroup":"charger","leaseId":"l","status":"completed","error":null}`, 200, 1, 0},
		{"ack non-uuid partition", "POST", "/api/v1/ack", `{"transactionId":"order-1","partitionId":"not-a-uuid"}`, 200, 1, 0},
		{"ack batch spec example", "POST", "/api/v1/ack/batch", `{"consumerGroup":"charger","acknowledgments":[{"transactionId":"t1","partitionId":"` + pid + `","status":"completed","leaseId":"l"},{"transactionId":"t2","partitionId":"` + pid + `","status":"failed","error":"boom"}]}`, 200, 1, 0},
		{"ack batch empty", "POST", "/api/v1/ack/batch", `{"acknowledgments":[]}`, 200, 0, 0},
		{"transaction spec example", "POST", "/api/v1/transaction", txnSpecExample, 200, 1, 0},
		{"transaction kv only", "POST", "/api/v1/transaction", `{"operations":[],"kv":[{"op":"putIfAbsent","ns":"charges","key":"k","value":1,"ttlSeconds":60,"required":true}]}`, 200, 1, 0},
		{"configure spec example", "POST", "/api/v1/configure", configureSpecExample, 200, 1, 0},
		{"configure empty queue name", "POST", "/api/v1/configure", `{"queue":""}`, 200, 1, 0},
		{"configure nulls", "POST", "/api/v1/configure", `{"queue":"q","namespace":null,"task":null,"options":{"leaseTime":null,"unknownOption":"x","priority":-1}}`, 200, 1, 0},
		{"lease extend empty object", "POST", "/api/v1/lease/lease-1/extend", `{}`, 200, 1, 0},
		{"lease extend seconds", "POST", "/api/v1/lease/lease-1/extend", `{"seconds":120}`, 200, 1, 0},
		{"kv seed probe", "POST", "/api/v1/kv", `{"operations":[{"op":"get","ns":"probe","key":"probe"}]}`, 200, 0, 1},
		{"kv getPrefix", "POST", "/api/v1/kv", `[{"op":"getPrefix","ns":"a","prefix":"p","limit":5000}]`, 200, 0, 1},
		{"kv two reads of one key", "POST", "/api/v1/kv", `[{"op":"get","ns":"a","key":"k"},{"op":"get","ns":"a","key":"k"}]`, 200, 0, 1},
		{"kv put", "POST", "/api/v1/kv", `{"operations":[{"op":"put","ns":"a","key":"k","value":null,"ttlSeconds":60}]}`, 200, 1, 0},
		{"kv putIfAbsent expect 0", "POST", "/api/v1/kv", `[{"op":"putIfAbsent","ns":"a","key":"k","value":1,"forever":true,"expect":0}]`, 200, 1, 0},
		{"kv value exactly 64KiB", "POST", "/api/v1/kv", `[{"op":"put","ns":"a","key":"k","forever":true,"value":"` + strings.Repeat("v", 64<<10-2) + `"}]`, 200, 1, 0},
		{"kv path get", "GET", "/api/v1/kv/charges/charge:ORD-1", ``, 200, 0, 1},
		{"kv path put", "PUT", "/api/v1/kv/charges/charge:ORD-1", `{"value":{"chargeId":"ch_1"},"ttlSeconds":3600}`, 200, 1, 0},
		{"kv path delete no body", "DELETE", "/api/v1/kv/charges/charge:ORD-1", ``, 200, 1, 0},
		{"kv path delete body", "DELETE", "/api/v1/kv/charges/a/b/c", `{"expect":3}`, 200, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fb.reset()
			rec := serve(api, tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d; body %.300s", rec.Code, tc.status, rec.Body.String())
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Errorf("body is not JSON: %.300s", rec.Body.String())
			}
			if n := len(fb.Applies()); n != tc.applies {
				t.Errorf("Apply called %d time(s), want %d", n, tc.applies)
			}
			if n := len(fb.Reads()); n != tc.reads {
				t.Errorf("Read called %d time(s), want %d", n, tc.reads)
			}
		})
	}
	t.Run("lease extend defaults to 60 seconds", func(t *testing.T) {
		fb.reset()
		serve(api, "POST", "/api/v1/lease/lease-7/extend", `{}`)
		a := fb.Applies()
		if len(a) != 1 || a[0].GetExtendLease().GetSeconds() != 60 || a[0].GetExtendLease().GetLeaseId() != "lease-7" {
			t.Errorf("applied %v, want ExtendLease{lease-7, 60}", a)
		}
	})
}

// TestUnknownAPIPath: spec §1.1, an unknown /api path is a 404 with the
// error envelope.
func TestUnknownAPIPath(t *testing.T) {
	fb, api := newFixture(t, 0)
	cases := []badCase{
		{name: "GET unknown", method: "GET", path: "/api/v1/nope"},
		{name: "POST unknown", method: "POST", path: "/api/v1/nope", body: `{}`},
		{name: "v2 prefix", method: "POST", path: "/api/v2/push", body: `{"items":[]}`},
		{name: "wrong method on push", method: "GET", path: "/api/v1/push"},
		{name: "wrong method on ack", method: "DELETE", path: "/api/v1/ack"},
		{name: "wrong method on kv batch", method: "GET", path: "/api/v1/kv"},
		{name: "extend without leaseId segment", method: "POST", path: "/api/v1/lease/extend", body: `{}`},
		{name: "queues clear (not routed in 0.15)", method: "DELETE", path: "/api/v1/queues/q/clear"},
		{name: "bare api", method: "GET", path: "/api/"},
		{name: "non-api path", method: "GET", path: "/nope"},
	}
	for i := range cases {
		cases[i].status = 404
	}
	runBadCases(t, fb, api, cases)
}

// TestPreflight: spec §1.1, OPTIONS /* answers 204 with the CORS headers.
func TestPreflight(t *testing.T) {
	fb, api := newFixture(t, 0)
	for _, path := range []string{"/api/v1/push", "/api/v1/kv/ns/key", "/api/v1/nope", "/health", "/"} {
		t.Run(path, func(t *testing.T) {
			fb.reset()
			rec := serve(api, http.MethodOptions, path, "")
			if rec.Code != http.StatusNoContent {
				t.Errorf("status %d, want 204", rec.Code)
			}
			if rec.Body.Len() != 0 {
				t.Errorf("body %q, want none", rec.Body.String())
			}
			checkCORS(t, rec.Header())
			if len(fb.Applies())+len(fb.Pops())+len(fb.Reads()) != 0 {
				t.Error("a preflight reached the backend")
			}
		})
	}
}

// TestCORSOnErrors: "every response carries" the CORS headers, refusals too.
func TestCORSOnErrors(t *testing.T) {
	_, api := newFixture(t, 0)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/push", ""},
		{"POST", "/api/v1/kv", `[{"op":"put","ns":"a","key":"k","value":1}]`},
		{"GET", "/api/v1/nope", ""},
	} {
		rec := serve(api, r.method, r.path, r.body)
		if rec.Code < 400 {
			t.Fatalf("%s %s: status %d, want a 4xx", r.method, r.path, rec.Code)
		}
		checkCORS(t, rec.Header())
	}
}

func checkCORS(t *testing.T, h http.Header) {
	t.Helper()
	if v := h.Get("Access-Control-Allow-Origin"); v != "*" {
		t.Errorf("Access-Control-Allow-Origin = %q, want *", v)
	}
	if v := h.Get("Access-Control-Allow-Methods"); v != "GET, POST, PUT, DELETE, OPTIONS" {
		t.Errorf("Access-Control-Allow-Methods = %q, want %q", v, "GET, POST, PUT, DELETE, OPTIONS")
	}
	// The spec lists Content-Type and Authorization; a superset still lets
	// every client through.
	allowed := map[string]bool{}
	for _, f := range strings.Split(h.Get("Access-Control-Allow-Headers"), ",") {
		allowed[strings.ToLower(strings.TrimSpace(f))] = true
	}
	for _, want := range []string{"content-type", "authorization"} {
		if !allowed[want] {
			t.Errorf("Access-Control-Allow-Headers = %q, missing %s", h.Get("Access-Control-Allow-Headers"), want)
		}
	}
	if v := h.Get("Access-Control-Max-Age"); v != "86400" {
		t.Errorf("Access-Control-Max-Age = %q, want 86400", v)
	}
}

// TestPopNonsenseQueryNever4xx: spec §1.1 and §4.3, "Bad query values never
// give 4xx, they fall back to defaults".
func TestPopNonsenseQueryNever4xx(t *testing.T) {
	fb, api := newFixture(t, 0)
	type want struct {
		batch uint32
		wait  time.Duration
	}
	queries := []struct {
		q string
		w want
	}{
		{"batch=abc", want{1, 0}},
		{"timeout=-5", want{1, 0}},
		{"wait=maybe", want{1, 0}},
		{"wait=maybe&timeout=1000", want{1, 0}},
		{"wait=TRUE", want{1, 0}},
		{"wait=true&timeout=-5", want{1, 30 * time.Second}},
		{"wait=1&timeout=abc", want{1, 30 * time.Second}},
		{"wait=true&timeout=1.5", want{1, 30 * time.Second}},
		{"wait=true&timeout=", want{1, 30 * time.Second}},
		{"wait=true&timeout=2000", want{1, 2 * time.Second}},
		{"batch=-1&partitions=abc", want{1, 0}},
		{"batch=0&partitions=0", want{1, 0}},
		{"batch=1e3", want{1, 0}},
		{"batch=99999999999999999999", want{1, 0}},
		{"batch=+5", want{1, 0}}, // "+" decodes to a space (spec §1.1): " 5" does not parse
		{"batch=%zz&wait=%", want{1, 0}},
		{"batch=10&batch=abc", want{10, 0}},
		{"autoAck=yes&subscriptionMode=weird&subscriptionFrom=garbage", want{1, 0}},
		{"subscriptionFrom=2026-13-45T99:99:99Z", want{1, 0}},
		{"consumerGroup=&batch=&timeout=&wait=", want{1, 0}},
		{"leaseSeconds=-3&leaseSeconds=abc", want{1, 0}},
		{";;;&&&==", want{1, 0}},
	}
	routes := []string{"/api/v1/pop/queue/orders", "/api/v1/pop/queue/orders/partition/cust-42", "/api/v1/pop?namespace=billing&"}
	for _, route := range routes {
		for _, tc := range queries {
			sep := "?"
			if strings.Contains(route, "?") {
				sep = ""
			}
			target := route + sep + tc.q
			t.Run(target, func(t *testing.T) {
				fb.reset()
				rec := serve(api, "GET", target, "")
				if rec.Code != http.StatusNoContent {
					t.Fatalf("status %d, want 204 (empty pop); body %s", rec.Code, rec.Body.String())
				}
				if rec.Body.Len() != 0 {
					t.Errorf("a 204 pop carries a body: %q", rec.Body.String())
				}
				pops := fb.Pops()
				if len(pops) != 1 {
					t.Fatalf("Pop called %d times, want 1", len(pops))
				}
				if pops[0].In.Batch != tc.w.batch || pops[0].Wait != tc.w.wait {
					t.Errorf("Pop(batch %d, wait %v), want batch %d, wait %v", pops[0].In.Batch, pops[0].Wait, tc.w.batch, tc.w.wait)
				}
			})
		}
	}
}

// TestPopTimeoutDoesNotWrap: a long-poll timeout past what a Duration holds
// must clamp to the API's ceiling, not wrap into a negative wait (which
// makes wait=true answer at once, and a client's long-poll loop spin).
func TestPopTimeoutDoesNotWrap(t *testing.T) {
	fb, api := newFixture(t, 0)
	for _, ms := range []string{"9223372036854775807", "10000000000000", "9300000000000"} {
		t.Run(ms, func(t *testing.T) {
			fb.reset()
			rec := serve(api, "GET", "/api/v1/pop/queue/orders?wait=true&timeout="+ms, "")
			if rec.Code >= 400 {
				t.Fatalf("status %d, want 200/204", rec.Code)
			}
			pops := fb.Pops()
			if len(pops) != 1 {
				t.Fatalf("Pop called %d times, want 1", len(pops))
			}
			if w := pops[0].Wait; w != request.MaxPopWait {
				t.Errorf("wait=true&timeout=%s handed the backend wait %v, want the %v ceiling", ms, w, request.MaxPopWait)
			}
		})
	}
}

// TestPopUnkeyableConsumerGroup: names are joined with NUL in the state's
// keys and the decoder refuses NUL (and > 512 bytes) "in every name"; the
// ack routes do refuse such a group with 400. A pop must not hand one to the
// backend either (it would lease messages that no ack can then release).
// Pop never answers 4xx, so the expected answer is the empty pop.
func TestPopUnkeyableConsumerGroup(t *testing.T) {
	fb, api := newFixture(t, 0)
	for _, tc := range []struct{ name, group string }{
		{"NUL", "char%00ger"},
		{"too long", strings.Repeat("g", 513)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb.reset()
			rec := serve(api, "GET", "/api/v1/pop/queue/orders?consumerGroup="+tc.group, "")
			if rec.Code >= 400 {
				t.Fatalf("status %d: pop must never be 4xx", rec.Code)
			}
			for _, p := range fb.Pops() {
				if err := request.CheckName("consumerGroup", p.In.ConsumerGroup); err != nil {
					t.Errorf("Pop reached the backend with consumerGroup %.40q (%v); the ack route refuses that group with 400", p.In.ConsumerGroup, err)
				}
			}
		})
	}
}

// TestDurationsFitInMicroseconds: every duration the API hands the backend
// is turned into microseconds and added to the clock (now + s*1e6). A value
// the API accepts must survive that, else it wraps negative: a KV write
// that answers applied:true and is already expired, a lease that is born
// expired (and so no longer exclusive), a delay or window that is skipped.
// The API may refuse such a value (4xx, nothing applied) or clamp it; it
// must not pass it through.
func TestDurationsFitInMicroseconds(t *testing.T) {
	fb, api := newFixture(t, 0)
	const maxSafe = "9007199254740991" // JS Number.MAX_SAFE_INTEGER, a common "forever"
	const maxInt = "9223372036854775807"
	fits := func(v, unitUs int64) bool { return v >= 0 && v <= (math.MaxInt64-fb.now)/unitUs }
	for _, tc := range []struct {
		name, method, path, body string
		check                    func(*fakeBackend) (int64, int64) // value, µs per unit
	}{
		// 1e13 wraps now+d negative: checked against the real FSM, the put
		// answers applied:true and a get right after finds nothing.
		{"kv put ttlSeconds 1e13", "POST", "/api/v1/kv", `[{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":10000000000000}]`, kvTTL},
		{"kv put ttlSeconds MAX_SAFE_INTEGER", "POST", "/api/v1/kv", `[{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":` + maxSafe + `}]`, kvTTL},
		{"kv incr ttlSeconds max int64", "POST", "/api/v1/kv", `[{"op":"incr","ns":"a","key":"k","ttlSeconds":` + maxInt + `}]`, kvTTL},
		{"kv path put ttlSeconds", "PUT", "/api/v1/kv/a/k", `{"value":1,"ttlSeconds":` + maxSafe + `}`, kvTTL},
		{"transaction kv ttlSeconds", "POST", "/api/v1/transaction", `{"operations":[],"kv":[{"op":"putIfAbsent","ns":"a","key":"k","value":1,"ttlSeconds":` + maxSafe + `,"required":true}]}`, kvTTL},
		// 1e13 wraps the lease expiry negative: checked against the real
		// FSM, a second pop of the same group gets the same message.
		{"configure leaseTime 1e13", "POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":10000000000000}}`,
			func(f *fakeBackend) (int64, int64) { return configured(f).GetLeaseTime(), 1e6 }},
		{"configure leaseTime", "POST", "/api/v1/configure", `{"queue":"q","options":{"leaseTime":` + maxInt + `}}`,
			func(f *fakeBackend) (int64, int64) { return configured(f).GetLeaseTime(), 1e6 }},
		{"configure delayedProcessing", "POST", "/api/v1/configure", `{"queue":"q","options":{"delayedProcessing":` + maxSafe + `}}`,
			func(f *fakeBackend) (int64, int64) { return configured(f).GetDelayedProcessing(), 1e6 }},
		{"configure windowBuffer", "POST", "/api/v1/configure", `{"queue":"q","options":{"windowBuffer":` + maxSafe + `}}`,
			func(f *fakeBackend) (int64, int64) { return configured(f).GetWindowBuffer(), 1e6 }},
		{"configure retryDelay (ms)", "POST", "/api/v1/configure", `{"queue":"q","options":{"retryDelay":` + maxInt + `}}`,
			func(f *fakeBackend) (int64, int64) { return configured(f).GetRetryDelay(), 1e3 }},
		{"pop leaseSeconds", "GET", "/api/v1/pop/queue/q?leaseSeconds=" + maxInt, ``,
			func(f *fakeBackend) (int64, int64) {
				if p := f.Pops(); len(p) == 1 {
					return p[0].In.LeaseSeconds, 1e6
				}
				return 0, 1
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb.reset()
			rec := serve(api, tc.method, tc.path, tc.body)
			if rec.Code >= 500 {
				t.Fatalf("status %d", rec.Code)
			}
			if rec.Code >= 400 {
				if len(fb.Applies()) != 0 {
					t.Errorf("refused with %d but applied", rec.Code)
				}
				return
			}
			if v, unit := tc.check(fb); !fits(v, unit) {
				t.Errorf("accepted (%d) and handed the backend %d × %dµs, which overflows now+d (int64 µs)", rec.Code, v, unit)
			}
		})
	}
}

func kvTTL(f *fakeBackend) (int64, int64) {
	for _, c := range f.Applies() {
		ops := c.GetKv().GetOps()
		if t := c.GetTransaction(); t != nil {
			ops = t.Kv
		}
		for _, op := range ops {
			return op.TtlSeconds, 1e6
		}
	}
	return 0, 1
}

func configured(f *fakeBackend) *command.QueueOptions {
	for _, c := range f.Applies() {
		if cf := c.GetConfigure(); cf != nil {
			return cf.Options
		}
	}
	return nil
}

// TestNewWithoutRegistry: Config.Registry is optional (routes() serves no
// /metrics/prometheus when it is nil), so New must work without one.
func TestNewWithoutRegistry(t *testing.T) {
	fb := newFakeBackend(t)
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("New(Config{Registry: nil}) panicked: %v", p)
		}
	}()
	api := New(Config{Backend: fb, Logger: discardLogger()})
	if rec := serve(api, "GET", "/health", ""); rec.Code != 200 {
		t.Errorf("/health status %d, want 200", rec.Code)
	}
}

// TestBackendErrorsAreRetryable5xx: a failing node is a 5xx with the
// envelope (clients retry those, spec §1.2), never a dropped connection.
func TestBackendErrorsAreRetryable5xx(t *testing.T) {
	fb, api := newFixture(t, 0)
	fb.ApplyFn = func(*command.Command) (proto.Message, error) { return nil, fmt.Errorf("disk on fire") }
	rec := serve(api, "POST", "/api/v1/push", `{"items":[{"queue":"q"}]}`)
	if rec.Code != 500 {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	errorEnvelope(t, rec)
}

// txnSpecExample is the request of spec §4.5.
const txnSpecExample = `{ "operations": [
    { "type": "ack", "transactionId": "order-1", "partitionId": "` + pid + `",
      "consumerGroup": "charger", "leaseId": "lease-1", "status": "completed" },
    { "type": "push", "items": [ { "queue": "receipts", "partition": "cust-42",
                                   "payload": {"ok": true}, "transactionId": "rcpt-1" } ] } ],
  "requiredLeases": ["lease-1"],
  "kv": [ { "op": "putIfAbsent", "ns": "charges", "key": "charge:ORD-1",
            "value": {"chargeId": "ch_1"}, "ttlSeconds": 3600, "required": true } ] }`

// configureSpecExample is the request of spec §4.1.
const configureSpecExample = `{ "queue": "orders", "namespace": "billing", "task": "invoice",
  "options": { "leaseTime": 30, "retryLimit": 5, "retryDelay": 1000, "maxSize": 0,
               "delayedProcessing": 0, "windowBuffer": 0, "priority": 0, "ttl": 3600,
               "retentionEnabled": false, "retentionSeconds": 0, "completedRetentionSeconds": 0,
               "maxWaitTimeSeconds": 0, "deadLetterQueue": false, "dlqAfterMaxRetries": false,
               "encryptionEnabled": false } }`

// nameStatus is the status of a case: a queue, partition or group name over
// its limit is 413 name_too_long (addendum §4.9), anything else 400.
func nameStatus(name string) int {
	for _, n := range []string{"queue too long", "partition too long", "consumerGroup too long"} {
		if name == n {
			return http.StatusRequestEntityTooLarge
		}
	}
	return http.StatusBadRequest
}

// A lease id from the path that is not valid UTF-8, or holds a NUL, is a
// 400: such a string cannot enter a log entry (the HTTP fuzzer found %ff
// answered 500).
func TestLeaseIDsThatCannotBeKeyed(t *testing.T) {
	fb, api := newFixture(t, 0)
	runBadCases(t, fb, api, []badCase{
		{name: "invalid UTF-8", method: "POST", path: "/api/v1/lease/%ff/extend", body: `{"seconds":2}`, status: 400, err: "leaseId must be valid UTF-8"},
		{name: "NUL", method: "POST", path: "/api/v1/lease/a%00b/extend", body: `{"seconds":2}`, status: 400, err: "leaseId must not contain NUL"},
	})
}
