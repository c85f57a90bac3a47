package queen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// grpcTransport speaks queen.v1 (grpcapi/queenpb/queen.proto).
type grpcTransport struct {
	conn *grpc.ClientConn
	c    pb.QueenClient
}

func newGRPC(target string, opts []grpc.DialOption, token TokenSource) (*grpcTransport, error) {
	base := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20))}
	if token != nil {
		base = append(base, grpc.WithPerRPCCredentials(bearer(token)))
	}
	conn, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	return &grpcTransport{conn: conn, c: pb.NewQueenClient(conn)}, nil
}

func (t *grpcTransport) close() error { return t.conn.Close() }

// wrap turns a status into an *Error, with the ErrorInfo reason when the
// broker sent one. The caller's own context ending is returned as is.
func wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return errors.Join(ctx.Err(), err)
	}
	st := status.Convert(err)
	e := &Error{Code: st.Code(), Message: st.Message(), grpc: true}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Reason = info.Reason
		}
	}
	return e
}

func toPBPush(it pushItem) *pb.PushItem {
	return &pb.PushItem{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload, TransactionId: it.TransactionID, TraceId: it.TraceID}
}

var pushStatusNames = map[pb.PushStatus]string{
	pb.PushStatus_PUSH_STATUS_QUEUED: "queued", pb.PushStatus_PUSH_STATUS_DUPLICATE: "duplicate",
	pb.PushStatus_PUSH_STATUS_BUFFERED: "buffered", pb.PushStatus_PUSH_STATUS_FAILED: "failed",
}

func (t *grpcTransport) push(ctx context.Context, items []pushItem) ([]PushResult, error) {
	in := &pb.PushRequest{Items: make([]*pb.PushItem, len(items))}
	for i, it := range items {
		in.Items[i] = toPBPush(it)
	}
	out, err := t.c.Push(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := make([]PushResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = PushResult{Status: pushStatusNames[r.Status], TransactionID: r.TransactionId, MessageID: r.MessageId,
			PartitionID: r.PartitionId, Error: r.Error}
	}
	return res, nil
}

var subscriptionModes = map[SubscriptionMode]pb.SubscriptionMode{
	SubscribeAll: pb.SubscriptionMode_SUBSCRIPTION_MODE_ALL, SubscribeNew: pb.SubscriptionMode_SUBSCRIPTION_MODE_NEW,
}

func (t *grpcTransport) pop(ctx context.Context, queue string, o PopOptions) ([]*Message, error) {
	in := &pb.PopRequest{Queue: queue, Partition: o.Partition, ConsumerGroup: o.Group, Batch: uint32(max(o.Batch, 1)),
		Partitions: uint32(max(o.Partitions, 1)), WaitMs: uint32(o.Wait.Milliseconds()), AutoAck: o.AutoAck,
		SubscriptionMode: subscriptionModes[o.Subscription]}
	if o.LeaseTime > 0 {
		in.LeaseSeconds, _ = ttlSeconds(o.LeaseTime)
	}
	if o.Subscription != "" && o.Subscription != SubscribeNew {
		in.SubscriptionMode = pb.SubscriptionMode_SUBSCRIPTION_MODE_ALL // any other explicit mode means all (§5.7)
	}
	if !o.SubscriptionFrom.IsZero() {
		in.SubscriptionFrom = timestamppb.New(o.SubscriptionFrom)
	}
	out, err := t.c.Pop(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return fromPBBatch(out), nil
}

func fromPBBatch(out *pb.PopResponse) []*Message {
	msgs := make([]*Message, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = &Message{ID: m.Id, TransactionID: m.TransactionId, TraceID: m.TraceId, Data: m.Payload, Queue: m.Queue,
			Partition: m.Partition, PartitionID: m.PartitionId, LeaseID: m.LeaseId, ConsumerGroup: m.ConsumerGroup,
			RetryCount: int(m.RetryCount), CreatedAt: m.CreatedAt.AsTime(), LeaseExpiresAt: asTime(out.LeaseExpiresAt)}
	}
	return msgs
}

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

var ackStatuses = map[AckStatus]pb.AckStatus{
	Completed: pb.AckStatus_ACK_STATUS_COMPLETED, Failed: pb.AckStatus_ACK_STATUS_FAILED,
	Retry: pb.AckStatus_ACK_STATUS_RETRY, DeadLetter: pb.AckStatus_ACK_STATUS_DLQ,
}

func toPBAck(a ackItem, group string) *pb.AckRequest {
	return &pb.AckRequest{TransactionId: a.TransactionID, PartitionId: a.PartitionID, ConsumerGroup: group,
		LeaseId: a.LeaseID, Status: ackStatuses[a.Status], Error: a.Error}
}

func fromPBAck(r *pb.AckResult) AckResult {
	return AckResult{TransactionID: r.TransactionId, Success: r.Success, Error: r.Error, LeaseReleased: r.LeaseReleased, DLQ: r.Dlq}
}

func (t *grpcTransport) ack(ctx context.Context, group string, item ackItem) ([]AckResult, error) {
	out, err := t.c.Ack(ctx, toPBAck(item, group))
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return []AckResult{fromPBAck(out.Result)}, nil
}

func (t *grpcTransport) ackBatch(ctx context.Context, group string, items []ackItem) ([]AckResult, error) {
	in := &pb.AckBatchRequest{ConsumerGroup: group, Items: make([]*pb.AckItem, len(items))}
	for i, a := range items {
		in.Items[i] = &pb.AckItem{TransactionId: a.TransactionID, PartitionId: a.PartitionID, LeaseId: a.LeaseID,
			Status: ackStatuses[a.Status], Error: a.Error}
	}
	out, err := t.c.AckBatch(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := make([]AckResult, len(out.Results))
	for i, r := range out.Results {
		res[i] = fromPBAck(r)
	}
	return res, nil
}

func (t *grpcTransport) extend(ctx context.Context, leaseID string, seconds int64) (extendResult, error) {
	out, err := t.c.ExtendLease(ctx, &pb.ExtendLeaseRequest{LeaseId: leaseID, Seconds: seconds})
	if err != nil {
		return extendResult{}, wrap(ctx, err)
	}
	return extendResult{Success: out.Success, Error: out.Error, ExpiresAt: asTime(out.ExpiresAt)}, nil
}

func (t *grpcTransport) configure(ctx context.Context, queue string, o *queueOptions) error {
	_, err := t.c.Configure(ctx, &pb.ConfigureRequest{Queue: queue, Options: &pb.QueueOptions{
		LeaseTime: o.leaseTime, RetryLimit: o.retryLimit, RetryDelay: o.retryDelayMs, MaxSize: o.maxSize,
		DelayedProcessing: o.delayedProcessing, WindowBuffer: o.windowBuffer, Priority: o.priority, Ttl: o.ttl,
		RetentionEnabled: o.retentionEnabled, RetentionSeconds: o.retentionSeconds,
		CompletedRetentionSeconds: o.completedRetentionSeconds, MaxWaitTimeSeconds: o.maxWaitTimeSeconds,
		DeadLetterQueue: o.deadLetterQueue, EncryptionEnabled: o.encryptionEnabled,
	}})
	return wrap(ctx, err)
}

func (t *grpcTransport) deleteQueue(ctx context.Context, queue string) error {
	_, err := t.c.DeleteQueue(ctx, &pb.DeleteQueueRequest{Queue: queue})
	return wrap(ctx, err)
}

// bearer puts a TokenSource's token in each call's metadata.
type bearer TokenSource

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := b(ctx)
	if err != nil {
		return nil, fmt.Errorf("queen: token: %w", err)
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity is false: a loopback broker without TLS takes
// tokens too (use TLS credentials beyond loopback).
func (bearer) RequireTransportSecurity() bool { return false }

// tenantUnary and tenantStream name the client's tenant (WithTenant) in
// every call's metadata.
func tenantUnary(name string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, "x-queen-tenant", name), method, req, reply, cc, opts...)
	}
}

func tenantStream(name string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(metadata.AppendToOutgoingContext(ctx, "x-queen-tenant", name), desc, cc, method, opts...)
	}
}
