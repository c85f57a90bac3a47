package grpcapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The same bad requests through both front ends: the HTTP API answers a
// 4xx, gRPC INVALID_ARGUMENT (with the same KV reason in its ErrorInfo),
// and neither changes anything.
func TestValidationParity(t *testing.T) {
	n, c, _ := dial(t)
	long := strings.Repeat("q", 513)
	kv := func(ops ...*pb.KvOp) func(context.Context) error {
		return func(ctx context.Context) error { _, err := c.Kv(ctx, &pb.KvRequest{Operations: ops}); return err }
	}
	push := func(it *pb.PushItem) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{it}})
			return err
		}
	}
	put := pb.KvOpKind_KV_OP_KIND_PUT
	timers := func(ops ...*pb.TimerOp) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.Timers(ctx, &pb.TimersRequest{Operations: ops})
			return err
		}
	}
	sched := pb.TimerOpKind_TIMER_OP_KIND_SCHEDULE
	cases := []struct {
		name, path, body string
		status           int
		grpc             func(context.Context) error
	}{
		{"push trace id", "/api/v1/push", `{"items":[{"queue":"parity","traceId":"nope"}]}`, 400,
			push(&pb.PushItem{Queue: "parity", TraceId: "nope"})},
		{"push NUL in queue", "/api/v1/push", `{"items":[{"queue":"par\u0000ity"}]}`, 400,
			push(&pb.PushItem{Queue: "par\x00ity"})},
		{"push long queue", "/api/v1/push", `{"items":[{"queue":"` + long + `"}]}`, 413, push(&pb.PushItem{Queue: long})},
		{"push long transaction id", "/api/v1/push", `{"items":[{"queue":"parity","transactionId":"` + strings.Repeat("t", 1025) + `"}]}`, 400,
			push(&pb.PushItem{Queue: "parity", TransactionId: strings.Repeat("t", 1025)})},
		{"ack without transaction id", "/api/v1/ack", `{"partitionId":"0193a8d0-0000-7000-8000-000000000000"}`, 400,
			func(ctx context.Context) error {
				_, err := c.Ack(ctx, &pb.AckRequest{PartitionId: "0193a8d0-0000-7000-8000-000000000000"})
				return err
			}},
		{"ack without partition id", "/api/v1/ack", `{"transactionId":"t"}`, 400,
			func(ctx context.Context) error { _, err := c.Ack(ctx, &pb.AckRequest{TransactionId: "t"}); return err }},
		{"ack batch item without partition id", "/api/v1/ack/batch", `{"acknowledgments":[{"transactionId":"t"}]}`, 400,
			func(ctx context.Context) error {
				_, err := c.AckBatch(ctx, &pb.AckBatchRequest{Items: []*pb.AckItem{{TransactionId: "t"}}})
				return err
			}},
		{"transaction with nothing", "/api/v1/transaction", `{"operations":[]}`, 400,
			func(ctx context.Context) error { _, err := c.Transaction(ctx, &pb.TransactionRequest{}); return err }},
		{"transaction getPrefix", "/api/v1/transaction", `{"kv":[{"op":"getPrefix","ns":"parity","prefix":"a"}]}`, 400,
			func(ctx context.Context) error {
				_, err := c.Transaction(ctx, &pb.TransactionRequest{Kv: []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_GET_PREFIX, Ns: "parity", Prefix: "a"}}})
				return err
			}},
		{"transaction gate without expiry", "/api/v1/transaction",
			`{"operations":[{"type":"push","queue":"parity"}],"kv":[{"op":"putIfAbsent","ns":"parity","key":"k","value":1,"required":true}]}`, 400,
			func(ctx context.Context) error {
				_, err := c.Transaction(ctx, &pb.TransactionRequest{
					Operations: []*pb.TransactionOp{{Op: &pb.TransactionOp_Push{Push: &pb.PushItem{Queue: "parity"}}}},
					Kv:         []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT, Ns: "parity", Key: "k", Value: []byte("1"), Required: true}}})
				return err
			}},
		{"kv bad namespace", "/api/v1/kv", `{"operations":[{"op":"put","ns":"Parity","key":"k","value":1,"forever":true}]}`, 400,
			kv(&pb.KvOp{Op: put, Ns: "Parity", Key: "k", Value: []byte("1"), Forever: true})},
		{"kv put without value", "/api/v1/kv", `{"operations":[{"op":"put","ns":"parity","key":"k","forever":true}]}`, 400,
			kv(&pb.KvOp{Op: put, Ns: "parity", Key: "k", Forever: true})},
		{"kv two expiries", "/api/v1/kv", `{"operations":[{"op":"put","ns":"parity","key":"k","value":1,"forever":true,"ttlSeconds":5}]}`, 400,
			kv(&pb.KvOp{Op: put, Ns: "parity", Key: "k", Value: []byte("1"), Forever: true, TtlSeconds: 5})},
		{"kv putIfAbsent expect", "/api/v1/kv", `{"operations":[{"op":"putIfAbsent","ns":"parity","key":"k","value":1,"forever":true,"expect":3}]}`, 400,
			kv(&pb.KvOp{Op: pb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT, Ns: "parity", Key: "k", Value: []byte("1"), Forever: true, Expect: proto.Uint64(3)})},
		{"kv cas without expect", "/api/v1/kv", `{"operations":[{"op":"cas","ns":"parity","key":"k","value":1,"forever":true}]}`, 400,
			kv(&pb.KvOp{Op: pb.KvOpKind_KV_OP_KIND_CAS, Ns: "parity", Key: "k", Value: []byte("1"), Forever: true})},
		{"kv two writes of a key", "/api/v1/kv",
			`{"operations":[{"op":"put","ns":"parity","key":"k","value":1,"forever":true},{"op":"delete","ns":"parity","key":"k"}]}`, 400,
			kv(&pb.KvOp{Op: put, Ns: "parity", Key: "k", Value: []byte("1"), Forever: true}, &pb.KvOp{Op: pb.KvOpKind_KV_OP_KIND_DELETE, Ns: "parity", Key: "k"})},
		{"kv getMany without keys", "/api/v1/kv", `{"operations":[{"op":"getMany","ns":"parity","keys":[]}]}`, 400,
			kv(&pb.KvOp{Op: pb.KvOpKind_KV_OP_KIND_GET_MANY, Ns: "parity"})},
		{"kv no operations", "/api/v1/kv", `{"operations":[]}`, 400, kv()},
		{"kv value too large", "/api/v1/kv", `{"operations":[{"op":"put","ns":"parity","key":"k","forever":true,"value":"` + strings.Repeat("v", 70000) + `"}]}`, 413,
			kv(&pb.KvOp{Op: put, Ns: "parity", Key: "k", Forever: true, Value: []byte(`"` + strings.Repeat("v", 70000) + `"`)})},
		{"extend too long", "/api/v1/lease/l1/extend", `{"seconds":700000}`, 400,
			func(ctx context.Context) error {
				_, err := c.ExtendLease(ctx, &pb.ExtendLeaseRequest{LeaseId: "l1", Seconds: 700000})
				return err
			}},
		{"timer without delay", "/api/v1/timers", `{"operations":[{"op":"schedule","queue":"parity","timerKey":"k","txn":"t","payload":"e30="}]}`, 400,
			timers(&pb.TimerOp{Op: sched, Queue: "parity", TimerKey: "k", Txn: "t", Payload: []byte("{}")})},
		{"timer key twice", "/api/v1/timers", `[{"op":"cancel","queue":"parity","timerKey":"k"},{"op":"cancel","queue":"parity","timerKey":"k"}]`, 400,
			timers(&pb.TimerOp{Op: pb.TimerOpKind_TIMER_OP_KIND_CANCEL, Queue: "parity", TimerKey: "k"}, &pb.TimerOp{Op: pb.TimerOpKind_TIMER_OP_KIND_CANCEL, Queue: "parity", TimerKey: "k"})},
		{"timer beyond the horizon", "/api/v1/timers", `{"operations":[{"op":"schedule","queue":"parity","timerKey":"k","txn":"t","payload":"e30=","delayMs":7862400001}]}`, 403,
			timers(&pb.TimerOp{Op: sched, Queue: "parity", TimerKey: "k", Txn: "t", Payload: []byte("{}"), DelayMs: proto.Float64(7862400001)})},
		{"configure negative lease", "/api/v1/configure", `{"queue":"parity","options":{"leaseTime":-1}}`, 400,
			func(ctx context.Context) error {
				_, err := c.Configure(ctx, &pb.ConfigureRequest{Queue: "parity", Options: &pb.QueueOptions{LeaseTime: proto.Int64(-1)}})
				return err
			}},
		{"configure retry delay too large", "/api/v1/configure", `{"queue":"parity","options":{"retryDelay":9999999999999999}}`, 400,
			func(ctx context.Context) error {
				_, err := c.Configure(ctx, &pb.ConfigureRequest{Queue: "parity", Options: &pb.QueueOptions{RetryDelay: proto.Int64(9999999999999999)}})
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, n.HTTPURL+tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("HTTP: %d %s, want %d", code, body, tc.status)
			}
			err := tc.grpc(ctxT(t))
			st := status.Convert(err)
			want := codes.InvalidArgument
			if tc.status == http.StatusForbidden { // refused for good: the same kind on both wires
				want = codes.FailedPrecondition
			}
			if st.Code() != want {
				t.Fatalf("gRPC: %v, want %v (HTTP said %v)", err, want, body)
			}
			if want := body["reason"]; want != nil && reasonOf(st) != want {
				t.Errorf("gRPC reason %q, HTTP reason %q", reasonOf(st), want)
			}
		})
	}
	// Nothing was written by either front end.
	ctx := ctxT(t)
	if r, err := c.Pop(ctx, &pb.PopRequest{Queue: "parity", Batch: 100}); err != nil || len(r.Messages) != 0 {
		t.Errorf("a refused request left messages: %v %v", r, err)
	}
	res, err := c.Kv(ctx, &pb.KvRequest{Operations: []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_GET_PREFIX, Ns: "parity", Prefix: "k"}}})
	if err != nil || len(res.Results[0].Rows) != 0 {
		t.Errorf("a refused request left KV entries: %v %v", res, err)
	}
	if code, body := get(t, n.HTTPURL+"/api/v1/resources/queues/parity"); code != 404 {
		t.Errorf("a refused request created the queue: %d %v", code, body)
	}
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return decodeBody(t, resp)
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return decodeBody(t, resp)
}

func decodeBody(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}
