package grpcapi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/request"
)

// Node is what the gRPC server needs from a node: the leader operations the
// forwarding service runs, and the same node API the HTTP front end uses
// (each call forwards to the leader on a follower). *cluster.Node is one.
type Node interface {
	Leader
	Apply(ctx context.Context, cmd *command.Command) (proto.Message, error)
	Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error)
	Read(ctx context.Context, level cluster.ReadLevel, fn func(*fsm.Reader) error) error
	Query(ctx context.Context, level cluster.ReadLevel, q *command.Query) (*command.QueryResult, error)
	PartitionQueue(ctx context.Context, pid []byte) (string, bool)
	LeaseQueues(ctx context.Context, leaseID string) ([]string, bool)
	Now() int64
	Ready() bool
	Status() cluster.RaftStatus
	// StatusOf is the Raft state of the group of the tenant ctx carries.
	StatusOf(ctx context.Context) cluster.RaftStatus
	ID() string
	// Watch is closed when an applied entry next changes queue.
	Watch(ctx context.Context, queue string) <-chan struct{}
	// Draining is closed when the node starts to stop.
	Draining() <-chan struct{}
}

// Public serves queen.v1.Queen: each call decodes its request (decode.go)
// into package request's rules, proposes one command through the node, and
// converts the result (convert.go). Failures become statuses in
// publicStatus.
type Public struct {
	queenpb.UnimplementedQueenServer
	node  Node
	rules *request.Rules
	pipe  *pipeline.Pipeline // the write path every front end shares
	opts  options
}

// NewPublic serves the public API on node.
func NewPublic(node Node, opts ...Option) *Public {
	o := buildOptions(opts)
	return &Public{node: node, rules: o.rules, opts: o,
		pipe: pipeline.New(pipeline.Config{Node: node, Timeout: o.requestTimeout, Logger: o.logger, Front: "grpc"})}
}

// Metadata names of the Idempotency-Key (package idempotency).
const (
	mdIdemKey      = "idempotency-key"
	mdIdemReplayed = "idempotent-replayed"
)

// keyOf reads a call's idempotency-key; the request's own bytes
// (deterministically encoded) identify it.
func (s *Public) keyOf(ctx context.Context, req proto.Message) (*command.Idempotency, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	keys := md.Get(mdIdemKey)
	if len(keys) == 0 {
		return nil, nil
	}
	method, _ := grpc.Method(ctx)
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	return s.rules.Idempotency(keys[0], callerOf(ctx), method, body)
}

// call is what the write path needs of a call beyond its command.
func call(ctx context.Context, idem *command.Idempotency) pipeline.Call {
	c := pipeline.Call{Idem: idem}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.Remote = p.Addr.String()
	}
	return c
}

// replayedHeader tells the client the answer is what its key stored first.
func replayedHeader(ctx context.Context, replayed bool) {
	if replayed {
		_ = grpc.SetHeader(ctx, metadata.Pairs(mdIdemReplayed, "true"))
	}
}

// refuse answers a refusal of the rules; with a key it is stored first, so
// that a retry gets the same answer (unless the key already has one).
func (s *Public) refuse(ctx context.Context, idem *command.Idempotency, err error) error {
	answer, replayed := s.pipe.Refuse(ctx, call(ctx, idem), err)
	replayedHeader(ctx, replayed)
	return publicStatus(answer)
}

// propose runs cmd through the write path every front end shares (package
// pipeline) with the call's key (idem may be nil), and returns its result
// (or the one the key stored first) as T.
func propose[T proto.Message](s *Public, ctx context.Context, idem *command.Idempotency, cmd *command.Command) (T, error) {
	var zero T
	out, replayed, err := s.pipe.Write(ctx, call(ctx, idem), cmd)
	replayedHeader(ctx, replayed)
	if err != nil {
		return zero, publicStatus(err)
	}
	typed, ok := out.(T)
	if !ok {
		return zero, publicStatus(cluster.ErrInternal)
	}
	return typed, nil
}

// Push appends messages as one entry.
func (s *Public) Push(ctx context.Context, in *queenpb.PushRequest) (*queenpb.PushResponse, error) {
	idem, err := s.keyOf(ctx, in)
	if err != nil {
		return nil, publicStatus(err)
	}
	decoded, err := pushItems(in.Items)
	var items []*command.PushItem
	if err == nil {
		items, err = request.Push(decoded)
	}
	if err != nil {
		return nil, s.refuse(ctx, idem, err)
	}
	if len(items) == 0 && idem == nil {
		return &queenpb.PushResponse{}, nil
	}
	res, err := propose[*command.PushResult](s, ctx, idem, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}})
	if err != nil {
		return nil, err
	}
	return pushOut(res), nil
}

// Pop claims messages, long-polling up to wait_ms.
func (s *Public) Pop(ctx context.Context, in *queenpb.PopRequest) (*queenpb.PopResponse, error) {
	decoded, err := pop(in)
	if err != nil {
		return nil, publicStatus(err)
	}
	cmd, wait, match, err := s.rules.Pop(decoded)
	if err != nil {
		return nil, publicStatus(err)
	}
	if !match {
		return &queenpb.PopResponse{Queue: in.Queue}, nil
	}
	res, err := s.pipe.Pop(ctx, cmd, wait)
	if err != nil {
		return nil, publicStatus(err)
	}
	return popOut(res), nil
}

// Ack settles one message. An unknown status is a refused result, as on
// the HTTP API.
func (s *Public) Ack(ctx context.Context, in *queenpb.AckRequest) (*queenpb.AckResponse, error) {
	acks, err := request.AckOne(ack(in))
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := s.acks(ctx, acks)
	if err != nil {
		return nil, err
	}
	return &queenpb.AckResponse{Result: res[0]}, nil
}

// AckBatch settles many messages of one group as one entry.
func (s *Public) AckBatch(ctx context.Context, in *queenpb.AckBatchRequest) (*queenpb.AckBatchResponse, error) {
	items, err := ackItems(in.Items)
	var acks request.Acks
	if err == nil {
		acks, err = request.AckBatch(in.ConsumerGroup, items)
	}
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := s.acks(ctx, acks)
	if err != nil {
		return nil, err
	}
	return &queenpb.AckBatchResponse{Results: res}, nil
}

// acks sends the acks as one entry and answers one result per item, in
// request order.
func (s *Public) acks(ctx context.Context, acks request.Acks) ([]*queenpb.AckResult, error) {
	var res *command.AckResult
	if cmd := acks.Command(); cmd != nil {
		var err error
		if res, err = propose[*command.AckResult](s, ctx, nil, cmd); err != nil {
			return nil, err
		}
	}
	results := acks.Results(res)
	out := make([]*queenpb.AckResult, len(results))
	for i, r := range results {
		out[i] = ackOut(r)
	}
	return out, nil
}

// Transaction applies acks, pushes, KV ops and timers all or nothing. Its
// refusals are verdicts in the response, not errors.
func (s *Public) Transaction(ctx context.Context, in *queenpb.TransactionRequest) (*queenpb.TransactionResponse, error) {
	idem, err := s.keyOf(ctx, in)
	if err != nil {
		return nil, publicStatus(err)
	}
	decoded, err := transaction(in)
	var txn *command.Transaction
	if err == nil {
		txn, err = s.opts.rules.Transaction(decoded)
	}
	var verdict *request.TxnRefused
	if errors.As(err, &verdict) {
		return txnOut(verdict.Result), nil
	}
	if err != nil {
		return nil, s.refuse(ctx, idem, err)
	}
	res, err := propose[*command.TxnResult](s, ctx, idem, &command.Command{Body: &command.Command_Transaction{Transaction: txn}})
	if err != nil {
		return nil, err
	}
	if e := request.TxnVerdict(res); e != nil {
		return nil, publicStatus(e)
	}
	return txnOut(res), nil
}

// ExtendLease extends every partition lease holding the lease id.
func (s *Public) ExtendLease(ctx context.Context, in *queenpb.ExtendLeaseRequest) (*queenpb.ExtendLeaseResponse, error) {
	ext, err := request.ExtendLease(in.LeaseId, in.Seconds, in.Seconds != 0)
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.ExtendResult](s, ctx, nil, &command.Command{Body: &command.Command_ExtendLease{ExtendLease: ext}})
	if err != nil {
		return nil, err
	}
	out := &queenpb.ExtendLeaseResponse{LeaseId: in.LeaseId, Success: res.Success, Error: res.Error}
	if res.Success {
		out.ExpiresAt = stamp(res.ExpiresUs)
	}
	return out, nil
}

// Configure creates or reconfigures a queue.
func (s *Public) Configure(ctx context.Context, in *queenpb.ConfigureRequest) (*queenpb.ConfigureResponse, error) {
	decoded, err := configure(in)
	var cfg *command.Configure
	if err == nil {
		cfg, err = request.ConfigureQueue(decoded)
	}
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.ConfigureResult](s, ctx, nil, &command.Command{Body: &command.Command_Configure{Configure: cfg}})
	if err != nil {
		return nil, err
	}
	return configureOut(res), nil
}

// DeleteQueue removes a queue; a missing one is not an error.
func (s *Public) DeleteQueue(ctx context.Context, in *queenpb.DeleteQueueRequest) (*queenpb.DeleteQueueResponse, error) {
	del, err := request.DeleteQueue(in.Queue)
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.DeleteQueueResult](s, ctx, nil, &command.Command{Body: &command.Command_DeleteQueue{DeleteQueue: del}})
	if err != nil {
		return nil, err
	}
	return &queenpb.DeleteQueueResponse{Existed: res.Existed}, nil
}

// Kv runs a batch: reads only is a linearizable read (rate-limited per
// node, across both front ends); any write makes it one entry.
func (s *Public) Kv(ctx context.Context, in *queenpb.KvRequest) (*queenpb.KvResponse, error) {
	idem, err := s.keyOf(ctx, in)
	if err != nil {
		return nil, publicStatus(err)
	}
	decoded, err := kvOps(in.Operations)
	var ops []*command.KVOp
	if err == nil {
		ops, err = request.KVBatch(decoded)
	}
	if err != nil {
		return nil, s.refuse(ctx, idem, err)
	}
	var res *command.KVBatchResult
	if request.HasKVWrites(ops) {
		if res, err = propose[*command.KVBatchResult](s, ctx, idem, &command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: ops}}}); err != nil {
			return nil, err
		}
	} else if res, err = s.readKV(ctx, ops); err != nil {
		return nil, publicStatus(err)
	}
	if e := request.KVVerdict(res); e != nil {
		return nil, publicStatus(e)
	}
	return kvBatchOut(res), nil
}

// readKV answers read-only ops from one linearizable view, which also says
// whether the operator's kill switch is on.
func (s *Public) readKV(ctx context.Context, ops []*command.KVOp) (*command.KVBatchResult, error) {
	if err := s.rules.AllowKVRead(); err != nil {
		return nil, err
	}
	res, err := s.query(ctx, &command.Query{Body: &command.Query_Kv{Kv: &command.KVReads{Ops: ops}}})
	return res.GetKv(), err
}

// callerOf is the token's sub, which scopes Idempotency-Keys ("" with JWT
// off).
func callerOf(ctx context.Context) string {
	if id := auth.IdentityFrom(ctx); id != nil {
		return id.Sub
	}
	return ""
}

// query runs a read query the caller may run (pipeline.Query).
func (s *Public) query(ctx context.Context, q *command.Query) (*command.QueryResult, error) {
	res, err := s.pipe.Query(ctx, cluster.Linearizable, q)
	if err != nil {
		return nil, publicStatus(err)
	}
	return res, nil
}
