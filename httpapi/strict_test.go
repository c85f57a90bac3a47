package httpapi

import (
	"net/http"
	"testing"
)

// Member names match exactly, as Queen and its clients spell them: a key in
// another case is an unknown member (ignored, so a required one is then
// missing), never taken for the spec's key. A name given twice, or text that
// is not UTF-8, is invalid JSON. (FuzzPushBody found `{"Items":[]}` answered
// 201 when encoding/json matched keys without regard to case.)
func TestMemberNamesMatchExactly(t *testing.T) {
	fb, api := newFixture(t, 0)
	runBadCases(t, fb, api, []badCase{
		{name: "push Items", path: "/api/v1/push", body: `{"Items":[]}`, status: 400, err: "items array is required"},
		{name: "push ITEMS", path: "/api/v1/push", body: `{"ITEMS":[{"queue":"q"}]}`, status: 400, err: "items array is required"},
		{name: "push QUEUE", path: "/api/v1/push", body: `{"items":[{"QUEUE":"q"}]}`, status: 400, err: "Queue must be a string"},
		{name: "push duplicate items", path: "/api/v1/push", body: `{"items":[],"items":[{"queue":"q"}]}`, status: 400, err: "Invalid JSON"},
		{name: "push invalid UTF-8", path: "/api/v1/push", body: "{\"items\":[{\"queue\":\"\xff\"}]}", status: 400, err: "Invalid JSON"},
		{name: "ack TransactionId", path: "/api/v1/ack", body: `{"TransactionId":"t","partitionId":"` + pid + `"}`, status: 400, err: "transactionId is required"},
		{name: "ack batch Acknowledgments", path: "/api/v1/ack/batch", body: `{"Acknowledgments":[]}`, status: 400, err: "acknowledgments array is required"},
		{name: "transaction Operations", path: "/api/v1/transaction", body: `{"Operations":[{"type":"push","queue":"q"}]}`, status: 400, err: "operations array required"},
		{name: "configure Queue", path: "/api/v1/configure", body: `{"Queue":"q"}`, status: 400, err: "queue is required"},
		{name: "kv Operations", path: "/api/v1/kv", body: `{"Operations":[{"op":"get","ns":"a","key":"k"}]}`, status: 400, reason: "kv_bad_request"},
		{name: "kv Op", path: "/api/v1/kv", body: `[{"Op":"get","ns":"a","key":"k"}]`, status: 400, reason: "kv_bad_op"},
		{name: "timers Operations", path: "/api/v1/timers", body: `{"Operations":[]}`, status: 400, reason: "timers_bad_request"},
		{name: "switches Kv", path: "/api/v1/system/kv-timers", body: `{"Kv":false}`, status: 400, err: "name at least one"},
	})
	// An unknown member of another case is ignored, as the spec ignores
	// unknown members: the push goes through with the spec's keys only.
	rec := serve(api, http.MethodPost, "/api/v1/push", `{"items":[{"queue":"q","TransactionId":"ignored"}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("push with an extra member: %d %s", rec.Code, rec.Body.String())
	}
	if got := fb.Applies()[0].GetPush().Items[0].TransactionId; got == "ignored" {
		t.Fatal("TransactionId was taken for transactionId")
	}
}
