package grpcapi_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth/authtest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The message, dead-letter and trace methods: what the HTTP routes do,
// with the codes of the same kinds, and refusals that write nothing.
func TestMessagesDeadLettersAndTracesOverGRPC(t *testing.T) {
	n, c, _ := dial(t)
	ctx := ctxT(t)
	hash := stateHash(t, n)
	refused := func(what string, want codes.Code, reason string, call func() error) {
		t.Helper()
		before := hash()
		err := call()
		st, _ := status.FromError(err)
		if st.Code() != want || (reason != "" && reasonOf(st) != reason) {
			t.Fatalf("%s: %v, want %v %s", what, err, want, reason)
		}
		if !authtest.Unchanged(hash, before, func() { call() }) {
			t.Fatalf("%s: refused but the state changed", what)
		}
	}
	push, err := c.Push(ctx, &pb.PushRequest{Items: []*pb.PushItem{
		{Queue: "jobs", TransactionId: "j1", Payload: []byte(`{"j":1}`)},
		{Queue: "jobs", TransactionId: "j2", Payload: []byte(`{"j":2}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	pid := push.Results[0].PartitionId
	pop, err := c.Pop(ctx, &pb.PopRequest{Queue: "jobs", Batch: 1})
	if err != nil || len(pop.Messages) != 1 {
		t.Fatal(pop, err)
	}
	if _, err := c.Ack(ctx, &pb.AckRequest{TransactionId: "j1", PartitionId: pid, LeaseId: pop.LeaseId, Status: pb.AckStatus_ACK_STATUS_DLQ}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListMessages(ctx, &pb.ListMessagesRequest{Queue: "jobs"})
	if err != nil || len(list.Messages) != 2 || list.Messages[1].Status != "dead_letter" || list.Mode != "queue" {
		t.Fatalf("list %v %v", list, err)
	}
	d, err := c.GetMessage(ctx, &pb.MessageRef{PartitionId: pid, TransactionId: "j1"})
	if err != nil || len(d.DeadLetters) != 1 || string(d.Payload) != `{"j":1}` {
		t.Fatalf("detail %v %v", d, err)
	}
	refused("list with a bad status", codes.InvalidArgument, "", func() error {
		_, err := c.ListMessages(ctx, &pb.ListMessagesRequest{Status: "gone"})
		return err
	})
	refused("unknown message", codes.NotFound, "", func() error {
		_, err := c.GetMessage(ctx, &pb.MessageRef{PartitionId: pid, TransactionId: "nope"})
		return err
	})
	refused("bad partition id", codes.InvalidArgument, "", func() error {
		_, err := c.DeleteMessage(ctx, &pb.MessageRef{PartitionId: "x", TransactionId: "j1"})
		return err
	})
	id := d.DeadLetters[0].DlqId
	rep, err := c.ReplayDeadLetter(ctx, &pb.ReplayDeadLetterRequest{DlqId: id})
	if err != nil || rep.Verdict != "moved" || rep.TransactionId != "dlq:"+id {
		t.Fatalf("replay %v %v", rep, err)
	}
	refused("second replay", codes.NotFound, "gone", func() error {
		_, err := c.ReplayDeadLetter(ctx, &pb.ReplayDeadLetterRequest{DlqId: id})
		return err
	})
	refused("replay by a message without a dead letter", codes.NotFound, "gone", func() error {
		_, err := c.ReplayDeadLetter(ctx, &pb.ReplayDeadLetterRequest{PartitionId: pid, TransactionId: "j2"})
		return err
	})
	refused("bad id", codes.InvalidArgument, "", func() error {
		_, err := c.ReplayDeadLetter(ctx, &pb.ReplayDeadLetterRequest{DlqId: "zz"})
		return err
	})
	refused("purge of every queue", codes.InvalidArgument, "", func() error {
		_, err := c.PurgeDeadLetters(ctx, &pb.PurgeDeadLettersRequest{})
		return err
	})
	if pr, err := c.PurgeDeadLetters(ctx, &pb.PurgeDeadLettersRequest{Queue: "jobs"}); err != nil || pr.Purged != 0 {
		t.Fatalf("purge %v %v", pr, err)
	}

	// Traces.
	tr, err := c.RecordTrace(ctx, &pb.RecordTraceRequest{TransactionId: "j2", PartitionId: pid, TraceNames: []string{"flow"}, Data: []byte(`{"a":1}`)})
	if err != nil || len(tr.TraceId) != 36 {
		t.Fatalf("record %v %v", tr, err)
	}
	refused("trace without data", codes.InvalidArgument, "", func() error {
		_, err := c.RecordTrace(ctx, &pb.RecordTraceRequest{TransactionId: "j2", PartitionId: pid})
		return err
	})
	refused("trace of no message", codes.NotFound, "", func() error {
		_, err := c.RecordTrace(ctx, &pb.RecordTraceRequest{TransactionId: "zz", PartitionId: pid, Data: []byte(`1`)})
		return err
	})
	lt, err := c.ListTraces(ctx, &pb.MessageRef{PartitionId: pid, TransactionId: "j2"})
	if err != nil || len(lt.Traces) != 1 || lt.Traces[0].EventType != "info" {
		t.Fatalf("traces %v %v", lt, err)
	}
	bn, err := c.TracesByName(ctx, &pb.TracesByNameRequest{Name: "flow"})
	if err != nil || bn.Total != 1 || string(bn.Traces[0].MessagePayload) != `{"j":2}` {
		t.Fatalf("by name %v %v", bn, err)
	}
	names, err := c.TraceNames(ctx, &pb.TraceNamesRequest{})
	if err != nil || names.Total != 1 || names.Names[0].TraceCount != 1 {
		t.Fatalf("names %v %v", names, err)
	}
	del, err := c.DeleteMessage(ctx, &pb.MessageRef{PartitionId: pid, TransactionId: "j2"})
	if err != nil || !del.Success {
		t.Fatalf("delete %v %v", del, err)
	}
	if names, _ := c.TraceNames(context.Background(), &pb.TraceNamesRequest{}); names.Total != 0 {
		t.Fatalf("traces outlived their message: %v", names)
	}
}
