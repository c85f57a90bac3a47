package queen_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// A keyed commit sent again is answered from the broker's record (flagged
// Replayed) instead of running again; the same key with another body is
// refused and applies nothing; a lost gate is replayed as the same value.
func TestTransactionIdempotencyKey(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		q := c.Queue("keyed")
		if _, err := q.Push(ctx, queen.Msg{TransactionID: "m1"}, queen.Msg{TransactionID: "m2"}); err != nil {
			t.Fatal(err)
		}
		msgs, err := q.Pop(ctx, queen.PopOptions{Batch: 2})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		commit := func(key, receipt string) (*queen.TxResult, error) {
			return c.Transaction().IdempotencyKey(key).Ack(msgs[0]).
				Push("receipts", receipt, queen.WithTransactionID("receipt-m1")).Commit(ctx)
		}
		first, err := commit("step/m1", "a")
		if err != nil || !first.Committed || first.Replayed {
			t.Fatalf("first commit: %+v %v", first, err)
		}
		// Without the key this repeat would be a DuplicateError (the push).
		again, err := commit("step/m1", "a")
		if err != nil || !again.Committed || !again.Replayed || again.Results[1].MessageID != first.Results[1].MessageID {
			t.Fatalf("repeat: %+v %v, first %+v", again, err, first)
		}
		_, err = commit("step/m1", "b")
		var qe *queen.Error
		if !errors.Is(err, queen.ErrIdempotencyKeyReused) || !errors.As(err, &qe) || qe.Code != codes.FailedPrecondition || qe.Retryable() {
			t.Fatalf("the key with another body: %#v", err)
		}
		if qe.Status != 0 && qe.Status != http.StatusUnprocessableEntity {
			t.Fatalf("the key with another body: HTTP %d, want 422", qe.Status)
		}
		receipts, err := c.Queue("receipts").Pop(ctx, queen.PopOptions{Batch: 10})
		if err != nil || len(receipts) != 1 || string(receipts[0].Data) != `"a"` {
			t.Fatalf("receipts: %v %v", receipts, err)
		}

		// A verdict is part of the record too.
		if _, err := c.KV().Put(ctx, "gates", "m2", "taken", time.Hour); err != nil {
			t.Fatal(err)
		}
		for i, wantReplayed := range []bool{false, true} {
			res, err := c.Transaction().IdempotencyKey("step/m2").Once("gates", "m2", time.Hour).Ack(msgs[1]).Commit(ctx)
			if err != nil || res.Committed || res.Precondition == nil || res.Precondition.Reason != "exists" || res.Replayed != wantReplayed {
				t.Fatalf("lost gate, send %d: %+v %v", i+1, res, err)
			}
		}
	})
}

// A key still in flight (HTTP 409, gRPC ALREADY_EXISTS with the broker's
// reason) is retried, and the key travels as the header and the metadata.
func TestIdempotencyKeyInFlightIsRetried(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	var keys []string
	url := server(t, func(i int, w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if i == 0 {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"a request with this Idempotency-Key is still in flight","code":"idempotency_key_in_flight"}`))
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.Write([]byte(`{"success":true,"transactionId":"t","results":[]}`))
	})
	c, _ := queen.New(url, fast)
	res, err := c.Transaction().IdempotencyKey("k-http").Push("q", 1).Commit(ctx)
	if err != nil || !res.Committed || !res.Replayed || len(keys) != 2 || keys[0] != "k-http" || keys[1] != "k-http" {
		t.Fatalf("HTTP: %+v %v, keys sent %q", res, err, keys)
	}

	f := &fakeTxn{}
	res, err = serveGRPC(t, f).Transaction().IdempotencyKey("k-grpc").Push("q", 1).Commit(ctx)
	if err != nil || !res.Committed || !res.Replayed || f.calls.Load() != 2 || f.key.Load() != "k-grpc" {
		t.Fatalf("gRPC: %+v %v after %d calls, key %v", res, err, f.calls.Load(), f.key.Load())
	}
}

// fakeTxn answers the first Transaction "still in flight" and the next as
// a replay.
type fakeTxn struct {
	pb.UnimplementedQueenServer
	calls atomic.Int32
	key   atomic.Value
}

func (f *fakeTxn) Transaction(ctx context.Context, in *pb.TransactionRequest) (*pb.TransactionResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if k := md.Get("idempotency-key"); len(k) == 1 {
		f.key.Store(k[0])
	}
	if f.calls.Add(1) == 1 {
		st, _ := status.New(codes.AlreadyExists, "still in flight").WithDetails(&errdetails.ErrorInfo{Reason: "idempotency_key_in_flight"})
		return nil, st.Err()
	}
	grpc.SetHeader(ctx, metadata.Pairs("idempotent-replayed", "true"))
	return &pb.TransactionResponse{Success: true, TransactionId: "t"}, nil
}
