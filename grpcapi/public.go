package grpcapi

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/kvstore"
)

// Node is what the gRPC server needs from a node: the leader operations the
// forwarding service runs, and the same node API the HTTP front end uses
// (each call forwards to the leader on a follower). *cluster.Node is one.
type Node interface {
	Leader
	Apply(ctx context.Context, cmd *fsmpb.Command) (proto.Message, error)
	Pop(ctx context.Context, in *fsmpb.Pop, wait time.Duration) (*fsmpb.PopResult, error)
	Read(ctx context.Context, level cluster.ReadLevel, fn func(*fsm.Reader) error) error
	Now() int64
	Ready() bool
	// Watch is closed when an applied entry next changes queue.
	Watch(queue string) <-chan struct{}
	// Draining is closed when the node starts to stop.
	Draining() <-chan struct{}
}

// Public serves queen.v1.Queen: each call validates its request
// (validate.go), proposes one command through the node, and converts the
// result (convert.go). Errors become statuses in ToStatus.
type Public struct {
	queenpb.UnimplementedQueenServer
	node    Node
	opts    options
	kvReads *rate.Limiter
}

// NewPublic serves the public API on node.
func NewPublic(node Node, opts ...Option) *Public {
	s := &Public{node: node, opts: buildOptions(opts)}
	if s.opts.kvReadRate > 0 {
		s.kvReads = rate.NewLimiter(rate.Limit(s.opts.kvReadRate), int(2*s.opts.kvReadRate))
	}
	return s
}

// apply proposes cmd, bounded by the request's context and the write
// timeout, and returns its result as T.
func apply[T proto.Message](s *Public, ctx context.Context, cmd *fsmpb.Command) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, s.opts.requestTimeout)
	defer cancel()
	res, err := s.node.Apply(ctx, cmd)
	if err != nil {
		return zero, ToStatus(err)
	}
	out, ok := res.(T)
	if !ok {
		return zero, ToStatus(cluster.ErrInternal)
	}
	return out, nil
}

// Push appends messages as one entry.
func (s *Public) Push(ctx context.Context, in *queenpb.PushRequest) (*queenpb.PushResponse, error) {
	items, err := pushItems(in.Items)
	if err != nil {
		return nil, ToStatus(err)
	}
	if len(items) == 0 {
		return &queenpb.PushResponse{}, nil
	}
	res, err := apply[*fsmpb.PushResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_Push{Push: &fsmpb.Push{Items: items}}})
	if err != nil {
		return nil, err
	}
	return pushOut(res), nil
}

// Pop claims messages, long-polling up to wait_ms.
func (s *Public) Pop(ctx context.Context, in *queenpb.PopRequest) (*queenpb.PopResponse, error) {
	pop, wait, match, err := s.popRequest(in)
	if err != nil {
		return nil, ToStatus(err)
	}
	if !match {
		return &queenpb.PopResponse{Queue: in.Queue}, nil
	}
	res, err := s.node.Pop(ctx, pop, wait)
	if err != nil {
		return nil, ToStatus(err)
	}
	return popOut(res), nil
}

// Ack settles one message. An unknown status is a refused result, as on
// the HTTP API.
func (s *Public) Ack(ctx context.Context, in *queenpb.AckRequest) (*queenpb.AckResponse, error) {
	it, known, err := ackItem(fromAckRequest(in), false)
	if err != nil {
		return nil, ToStatus(err)
	}
	res, err := s.acks(ctx, []*fsmpb.AckItem{it}, []bool{known})
	if err != nil {
		return nil, err
	}
	return &queenpb.AckResponse{Result: res[0]}, nil
}

// AckBatch settles many messages of one group as one entry.
func (s *Public) AckBatch(ctx context.Context, in *queenpb.AckBatchRequest) (*queenpb.AckBatchResponse, error) {
	if err := checkName("consumer_group", in.ConsumerGroup); err != nil {
		return nil, ToStatus(err)
	}
	items := make([]*fsmpb.AckItem, 0, len(in.Items))
	known := make([]bool, 0, len(in.Items))
	for _, a := range in.Items {
		if a == nil {
			return nil, ToStatus(invalid("Each acknowledgment must be set"))
		}
		it, k, err := ackItem(ackFields{a.TransactionId, a.PartitionId, in.ConsumerGroup, a.LeaseId, a.Status, a.Error}, true)
		if err != nil {
			return nil, ToStatus(err)
		}
		items, known = append(items, it), append(known, k)
	}
	res, err := s.acks(ctx, items, known)
	if err != nil {
		return nil, err
	}
	return &queenpb.AckBatchResponse{Results: res}, nil
}

// acks sends the items with a known status as one entry and answers one
// result per item, in request order.
func (s *Public) acks(ctx context.Context, items []*fsmpb.AckItem, known []bool) ([]*queenpb.AckResult, error) {
	out := make([]*queenpb.AckResult, len(items))
	var send []*fsmpb.AckItem
	var at []int
	for i, it := range items {
		if !known[i] {
			out[i] = &queenpb.AckResult{TransactionId: it.TransactionId, Error: "invalid status"}
			continue
		}
		send, at = append(send, it), append(at, i)
	}
	if len(send) == 0 {
		return out, nil
	}
	res, err := apply[*fsmpb.AckResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_Ack{Ack: &fsmpb.Ack{Items: send}}})
	if err != nil {
		return nil, err
	}
	for j, r := range res.Items {
		out[at[j]] = ackOut(r)
	}
	return out, nil
}

// Transaction applies acks, pushes and KV ops all or nothing. Its refusals
// are verdicts in the response, not errors.
func (s *Public) Transaction(ctx context.Context, in *queenpb.TransactionRequest) (*queenpb.TransactionResponse, error) {
	txn, err := transactionRequest(in)
	if err != nil {
		return nil, ToStatus(err)
	}
	res, err := apply[*fsmpb.TxnResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_Transaction{Transaction: txn}})
	if err != nil {
		return nil, err
	}
	if res.Reason == fsm.ReasonKVDisabled {
		return nil, ToStatus(errKVDisabled)
	}
	return txnOut(res), nil
}

// ExtendLease extends every partition lease holding the lease id.
func (s *Public) ExtendLease(ctx context.Context, in *queenpb.ExtendLeaseRequest) (*queenpb.ExtendLeaseResponse, error) {
	ext, err := extendRequest(in)
	if err != nil {
		return nil, ToStatus(err)
	}
	res, err := apply[*fsmpb.ExtendResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_ExtendLease{ExtendLease: ext}})
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
	cfg, err := configureRequest(in)
	if err != nil {
		return nil, ToStatus(err)
	}
	res, err := apply[*fsmpb.ConfigureResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_Configure{Configure: cfg}})
	if err != nil {
		return nil, err
	}
	return configureOut(res), nil
}

// DeleteQueue removes a queue; a missing one is not an error.
func (s *Public) DeleteQueue(ctx context.Context, in *queenpb.DeleteQueueRequest) (*queenpb.DeleteQueueResponse, error) {
	if err := checkName("queue", in.Queue); err != nil {
		return nil, ToStatus(err)
	}
	res, err := apply[*fsmpb.DeleteQueueResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_DeleteQueue{DeleteQueue: &fsmpb.DeleteQueue{Queue: in.Queue}}})
	if err != nil {
		return nil, err
	}
	return &queenpb.DeleteQueueResponse{Existed: res.Existed}, nil
}

// Kv runs a batch: reads only is a linearizable read (rate-limited per
// node, as on the HTTP API); any write makes it one entry.
func (s *Public) Kv(ctx context.Context, in *queenpb.KvRequest) (*queenpb.KvResponse, error) {
	ops, err := kvBatch(in)
	if err != nil {
		return nil, ToStatus(err)
	}
	var res *fsmpb.KVBatchResult
	if hasWrites(ops) {
		res, err = apply[*fsmpb.KVBatchResult](s, ctx, &fsmpb.Command{Body: &fsmpb.Command_Kv{Kv: &fsmpb.KVBatch{Ops: ops}}})
	} else {
		res, err = s.readKV(ctx, ops)
	}
	if err != nil {
		return nil, ToStatus(err)
	}
	if res.Reason == fsm.ReasonKVDisabled {
		return nil, ToStatus(errKVDisabled)
	}
	return kvBatchOut(res), nil
}

func hasWrites(ops []*fsmpb.KVOp) bool {
	for _, op := range ops {
		if kvstore.Gates(op.Kind) {
			return true
		}
	}
	return false
}

// readKV answers read-only ops from one linearizable view, which also says
// whether the operator's kill switch is on.
func (s *Public) readKV(ctx context.Context, ops []*fsmpb.KVOp) (*fsmpb.KVBatchResult, error) {
	if s.kvReads != nil && !s.kvReads.Allow() {
		return nil, errKVRateLimited
	}
	res := &fsmpb.KVBatchResult{Ok: true, FailedIndex: -1}
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		if !rd.Switches().KvEnabled {
			res = &fsmpb.KVBatchResult{Reason: fsm.ReasonKVDisabled}
			return nil
		}
		now := s.node.Now()
		for _, op := range ops {
			res.Results = append(res.Results, rd.KV(op, now))
		}
		return nil
	})
	return res, err
}
