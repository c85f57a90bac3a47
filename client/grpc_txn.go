package queen

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The gRPC transport's transaction and KV calls.

// keyed carries an Idempotency-Key ("" = none) in the call's metadata.
func keyed(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
}

// replayed reads the response header the broker sets on an answer it gave
// from a key's record.
func replayed(header metadata.MD) bool {
	v := header.Get("idempotent-replayed")
	return len(v) > 0 && v[0] == "true"
}

var kvKinds = map[string]pb.KvOpKind{
	"get": pb.KvOpKind_KV_OP_KIND_GET, "getMany": pb.KvOpKind_KV_OP_KIND_GET_MANY,
	"put": pb.KvOpKind_KV_OP_KIND_PUT, "putIfAbsent": pb.KvOpKind_KV_OP_KIND_PUT_IF_ABSENT,
	"delete": pb.KvOpKind_KV_OP_KIND_DELETE,
}

func toPBKV(op kvOp) *pb.KvOp {
	out := &pb.KvOp{Op: kvKinds[op.Op], Ns: op.NS, Key: op.Key, Keys: op.Keys, Expect: op.Expect, Required: op.Required}
	if op.Value != nil {
		out.Value = op.Value
	}
	if storesValue(op.Op) {
		out.TtlSeconds, out.Forever = ttlSeconds(op.TTL)
	}
	return out
}

func fromPBKV(r *pb.KvResult) kvResult {
	out := kvResult{Op: r.Op, Key: r.Key, Reason: r.Reason, Found: r.Found, Applied: r.Applied, Truncated: r.Truncated,
		Value: r.Value, Version: r.Version, ExpiresAt: asTime(r.ExpiresAt), Missing: r.Missing}
	for _, row := range r.Rows {
		out.Rows = append(out.Rows, KVEntry{Key: row.Key, Found: true, Value: row.Value, Version: row.Version, ExpiresAt: asTime(row.ExpiresAt)})
	}
	return out
}

func (t *grpcTransport) kv(ctx context.Context, ops []kvOp) (*kvResponse, error) {
	in := &pb.KvRequest{Operations: make([]*pb.KvOp, len(ops))}
	for i, op := range ops {
		in.Operations[i] = toPBKV(op)
	}
	out, err := t.c.Kv(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := &kvResponse{OK: out.Ok, Reason: out.Reason, FailedIndex: int(out.FailedIndex)}
	if out.Failed != nil {
		f := fromPBKV(out.Failed)
		res.Failed = &f
	}
	for _, r := range out.Results {
		res.Results = append(res.Results, fromPBKV(r))
	}
	return res, nil
}

func (t *grpcTransport) transaction(ctx context.Context, req *txnRequest) (*TxResult, error) {
	in := &pb.TransactionRequest{RequiredLeases: req.requiredLeases}
	for _, op := range req.ops {
		if op.ack != nil {
			in.Operations = append(in.Operations, &pb.TransactionOp{Op: &pb.TransactionOp_Ack{Ack: toPBAck(*op.ack, op.ack.Group)}})
		} else {
			in.Operations = append(in.Operations, &pb.TransactionOp{Op: &pb.TransactionOp_Push{Push: toPBPush(*op.push)}})
		}
	}
	for _, op := range req.kv {
		in.Kv = append(in.Kv, toPBKV(op))
	}
	in.Timers = toPBTimers(req.timers)
	var header metadata.MD
	out, err := t.c.Transaction(keyed(ctx, req.idemKey), in, grpc.Header(&header))
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := &TxResult{Committed: out.Success, TransactionID: out.TransactionId, Replayed: replayed(header)}
	if !out.Success {
		var failed *kvResult
		if out.FailedKv != nil {
			f := fromPBKV(out.FailedKv)
			failed = &f
		}
		return res, verdict(res, out.Reason, out.Error, int(out.FailedIndex), failed)
	}
	for _, r := range out.Results {
		it := TxItem{Type: r.Type, TransactionID: r.TransactionId, MessageID: r.MessageId, PartitionID: r.PartitionId,
			Queue: r.Queue, DLQ: r.Dlq, LeaseReleased: r.LeaseReleased}
		if r.Kv != nil {
			it.KV = &KVWrite{Key: r.Kv.Key, Applied: r.Kv.Applied, Reason: r.Kv.Reason, Version: r.Kv.Version, Value: r.Kv.Value}
		}
		if r.Timer != nil {
			tr := fromPBTimerResult(r.Timer)
			it.Timer = &tr
		}
		res.Results = append(res.Results, it)
	}
	return res, nil
}
