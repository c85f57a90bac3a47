package grpcapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/grpcapi/grpctest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// dial starts a node and returns a queen.v1 client to it.
func dial(t *testing.T) (*grpctest.Node, pb.QueenClient, *grpc.ClientConn) {
	t.Helper()
	n := grpctest.Start(t, grpctest.Options{})
	conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return n, pb.NewQueenClient(conn), conn
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPushPopAck(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	push, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{
		{Queue: "orders", TransactionId: "o1", Payload: []byte(`{"n":1}`)},
		{Queue: "orders", TransactionId: "o2"},
		{Queue: "orders", TransactionId: "o1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := push.Results
	if len(r) != 3 || r[0].Status != pb.PushStatus_PUSH_STATUS_QUEUED || r[2].Status != pb.PushStatus_PUSH_STATUS_DUPLICATE ||
		r[2].MessageId != r[0].MessageId || r[0].PartitionId == "" {
		t.Fatalf("push results: %v", r)
	}
	pop, err := c.Pop(ctx, &pb.PopRequest{Queue: "orders", Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(pop.Messages) != 2 || string(pop.Messages[0].Payload) != `{"n":1}` || string(pop.Messages[1].Payload) != "null" ||
		pop.LeaseId == "" || pop.Messages[0].LeaseId != pop.LeaseId || pop.Messages[0].ConsumerGroup != "__QUEUE_MODE__" ||
		pop.LeaseExpiresAt == nil || pop.Messages[0].CreatedAt == nil {
		t.Fatalf("pop: %v", pop)
	}
	m0, m1 := pop.Messages[0], pop.Messages[1]
	ack, err := c.Ack(ctx, &pb.AckRequest{TransactionId: m0.TransactionId, PartitionId: m0.PartitionId, LeaseId: m0.LeaseId})
	if err != nil || !ack.Result.Success || ack.Result.LeaseReleased {
		t.Fatalf("ack: %v %v", ack, err)
	}
	batch, err := c.AckBatch(ctx, &pb.AckBatchRequest{Items: []*pb.AckItem{
		{TransactionId: m1.TransactionId, PartitionId: m1.PartitionId, LeaseId: m1.LeaseId, Status: pb.AckStatus_ACK_STATUS_COMPLETED},
		{TransactionId: "x", PartitionId: m1.PartitionId, Status: pb.AckStatus(99)},
	}})
	if err != nil || len(batch.Results) != 2 || !batch.Results[0].LeaseReleased || batch.Results[1].Error != "invalid status" {
		t.Fatalf("ack batch: %v %v", batch, err)
	}
	// A stale lease is refused as a value.
	again, err := c.Ack(ctx, &pb.AckRequest{TransactionId: m0.TransactionId, PartitionId: m0.PartitionId, LeaseId: "stale"})
	if err != nil || again.Result.Success || again.Result.Error == "" {
		t.Fatalf("stale ack: %v %v", again, err)
	}
	empty, err := c.Pop(ctx, &pb.PopRequest{Queue: "orders"})
	if err != nil || len(empty.Messages) != 0 {
		t.Fatalf("drained queue: %v %v", empty, err)
	}
}

// waitParked waits until count long-poll pops stand parked on n: from then
// on a change they may take wakes them.
func waitParked(t *testing.T, n *grpctest.Node, count int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.ParkedPops() != count {
		if time.Now().After(deadline) {
			t.Fatalf("%d pops parked after 10 s, want %d", n.ParkedPops(), count)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A parked pop is woken by the push, not by its timeout: with a 10 s wait it
// returns the message long before the 10 s are up (half of them is a bound no
// wake-up could miss, and a pop that sleeps its timeout out cannot meet). An
// empty long poll lasts its whole timeout.
func TestLongPollWakesOnPush(t *testing.T) {
	n, c, _ := dial(t)
	ctx := ctxT(t)
	if _, err := c.Configure(ctx, &pb.ConfigureRequest{Queue: "lp"}); err != nil {
		t.Fatal(err)
	}
	const wait = 10 * time.Second
	type popped struct {
		res *pb.PopResponse
		err error
		at  time.Time
	}
	done := make(chan popped, 1)
	go func() {
		res, err := c.Pop(ctx, &pb.PopRequest{Queue: "lp", WaitMs: uint32(wait.Milliseconds())})
		done <- popped{res, err, time.Now()}
	}()
	waitParked(t, n, 1)
	pushed := time.Now()
	if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: "lp", Payload: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-done:
		if p.err != nil || len(p.res.Messages) != 1 {
			t.Fatalf("long poll woken by a push: %v %v", p.res, p.err)
		}
		t.Logf("the parked pop returned %v after the push was sent", p.at.Sub(pushed))
	case <-time.After(wait / 2):
		t.Fatalf("a pop parked with a %v wait had not returned %v after a push it could take", wait, wait/2)
	}

	const short = 500 * time.Millisecond
	start := time.Now()
	empty, err := c.Pop(ctx, &pb.PopRequest{Queue: "lp", WaitMs: uint32(short.Milliseconds())})
	if took := time.Since(start); err != nil || len(empty.Messages) != 0 || took < short {
		t.Fatalf("long poll of an empty queue: %v %v after %v, want nothing after its %v timeout", empty, err, took, short)
	}
}

func TestTransactionGateAndKV(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: "q", TransactionId: "t1"}, {Queue: "q", TransactionId: "t2"}}}); err != nil {
		t.Fatal(err)
	}
	pop, err := c.Pop(ctx, &pb.PopRequest{Queue: "q", Batch: 2})
	if err != nil || len(pop.Messages) != 2 {
		t.Fatalf("pop: %v %v", pop, err)
	}
	gate := func(m *pb.Message) *pb.TransactionRequest {
		return &pb.TransactionRequest{
			Operations: []*pb.TransactionOp{{Op: &pb.TransactionOp_Ack{Ack: &pb.AckRequest{
				TransactionId: m.TransactionId, PartitionId: m.PartitionId, LeaseId: m.LeaseId}}},
				{Op: &pb.TransactionOp_Push{Push: &pb.PushItem{Queue: "receipts", Payload: []byte(`{"ok":true}`)}}}},
			Kv: []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT, Ns: "charges", Key: "order", Value: []byte(`{"id":1}`),
				TtlSeconds: 60, Required: true}},
		}
	}
	first, err := c.Transaction(ctx, gate(pop.Messages[0]))
	if err != nil || !first.Success || len(first.Results) != 3 || first.Results[1].MessageId == "" || !first.Results[2].Kv.Applied {
		t.Fatalf("first commit: %v %v", first, err)
	}
	second, err := c.Transaction(ctx, gate(pop.Messages[1]))
	if err != nil || second.Success || second.Reason != "kv_precondition" || second.FailedKv.GetReason() != "exists" ||
		string(second.FailedKv.Value) != `{"id":1}` {
		t.Fatalf("second commit: %v %v", second, err)
	}
	kv, err := c.Kv(ctx, &pb.KvRequest{Operations: []*pb.KvOp{
		{Op: pb.KvOpKind_KV_OP_KIND_GET, Ns: "charges", Key: "order"},
		{Op: pb.KvOpKind_KV_OP_KIND_GET_MANY, Ns: "charges", Keys: []string{"order", "other"}},
	}})
	if err != nil || !kv.Ok || !kv.Results[0].Found || string(kv.Results[0].Value) != `{"id":1}` ||
		len(kv.Results[1].Rows) != 1 || len(kv.Results[1].Missing) != 1 {
		t.Fatalf("kv read: %v %v", kv, err)
	}
	w, err := c.Kv(ctx, &pb.KvRequest{Operations: []*pb.KvOp{{Op: pb.KvOpKind_KV_OP_KIND_PUT, Ns: "charges", Key: "n",
		Value: []byte("null"), Forever: true}}})
	if err != nil || !w.Ok || !w.Results[0].Applied || w.Results[0].Version == 0 {
		t.Fatalf("kv put: %v %v", w, err)
	}
	// The refused transaction wrote nothing: receipts holds one message.
	r, err := c.Pop(ctx, &pb.PopRequest{Queue: "receipts", Batch: 10})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("receipts: %v %v", r, err)
	}
}

func TestConfigureExtendDelete(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	cfg, err := c.Configure(ctx, &pb.ConfigureRequest{Queue: "cq", Namespace: proto.String("billing"),
		Options: &pb.QueueOptions{LeaseTime: proto.Int64(30), RetryLimit: proto.Int64(0), EncryptionEnabled: proto.Bool(true)}})
	if err != nil || cfg.Options.GetLeaseTime() != 30 || cfg.Options.RetryLimit == nil || cfg.Options.GetRetryLimit() != 0 ||
		!cfg.Options.GetEncryptionEnabled() || cfg.Namespace != "billing" || cfg.PartitionId == "" {
		t.Fatalf("configure: %v %v", cfg, err)
	}
	// Merge: an option not named keeps its value.
	cfg, err = c.Configure(ctx, &pb.ConfigureRequest{Queue: "cq", Options: &pb.QueueOptions{RetryDelay: proto.Int64(250)}})
	if err != nil || cfg.Options.GetLeaseTime() != 30 || cfg.Options.GetRetryDelay() != 250 {
		t.Fatalf("merge: %v %v", cfg, err)
	}
	c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: "cq"}}})
	pop, _ := c.Pop(ctx, &pb.PopRequest{Queue: "cq"})
	ext, err := c.ExtendLease(ctx, &pb.ExtendLeaseRequest{LeaseId: pop.LeaseId, Seconds: 600})
	if err != nil || !ext.Success || ext.ExpiresAt.AsTime().Before(time.Now().Add(590*time.Second)) {
		t.Fatalf("extend: %v %v", ext, err)
	}
	missing, err := c.ExtendLease(ctx, &pb.ExtendLeaseRequest{LeaseId: "nope"})
	if err != nil || missing.Success || missing.Error != "Lease not found" {
		t.Fatalf("extend unknown: %v %v", missing, err)
	}
	del, err := c.DeleteQueue(ctx, &pb.DeleteQueueRequest{Queue: "cq"})
	if err != nil || !del.Existed {
		t.Fatalf("delete: %v %v", del, err)
	}
	del, err = c.DeleteQueue(ctx, &pb.DeleteQueueRequest{Queue: "cq"})
	if err != nil || del.Existed {
		t.Fatalf("delete again: %v %v", del, err)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	_, c, _ := dial(t)
	ctx := ctxT(t)
	big, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 2<<20)})
	if _, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{{Queue: "big", Payload: big}}}); err != nil {
		t.Fatal(err)
	}
	pop, err := c.Pop(ctx, &pb.PopRequest{Queue: "big"})
	if err != nil || len(pop.Messages) != 1 || string(pop.Messages[0].Payload) != string(big) {
		t.Fatalf("2 MB payload did not round-trip: %v", err)
	}
}
