package queen

import (
	"context"
	"time"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// admin.go's calls over queen.v1.

var lockKinds = map[string]pb.LockOpKind{"acquire": pb.LockOpKind_LOCK_OP_KIND_ACQUIRE, "renew": pb.LockOpKind_LOCK_OP_KIND_RENEW,
	"release": pb.LockOpKind_LOCK_OP_KIND_RELEASE, "get": pb.LockOpKind_LOCK_OP_KIND_GET}

func (t *grpcTransport) locks(ctx context.Context, ops []lockOp) ([]Lock, error) {
	in := &pb.LocksRequest{}
	for _, op := range ops {
		o := &pb.LockOp{Op: lockKinds[op.Op], Name: op.Name, TtlSeconds: op.TTL}
		if op.Owner != "" {
			o.Owner = &op.Owner
		}
		if op.Limit > 0 {
			n := uint32(op.Limit)
			o.Limit = &n
		}
		if op.Op == "renew" || op.Op == "release" {
			slot := op.Slot
			o.Token, o.Slot = op.Token, &slot
		}
		in.Operations = append(in.Operations, o)
	}
	out, err := t.c.Locks(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := make([]Lock, len(out.Results))
	for i, r := range out.Results {
		l := Lock{Name: r.Name, OK: r.Ok, Reason: r.Reason, Slot: r.Slot, Token: r.Token, Owner: r.GetOwner(), Already: r.Already,
			Since: asTime(r.Since), ExpiresAt: asTime(r.ExpiresAt), Held: r.Op == "get" && r.Held}
		if g := r.Guard; g != nil {
			l.GuardNS, l.GuardKey, l.GuardExpect = g.Ns, g.Key, g.GetExpect()
		}
		for _, h := range r.Holders {
			l.Holders = append(l.Holders, LockHolder{Slot: h.Slot, Owner: h.GetOwner(), Token: h.Token, Since: asTime(h.Since), ExpiresAt: asTime(h.ExpiresAt)})
		}
		res[i] = l
	}
	return res, nil
}

func parseISO(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	return parseTime(s)
}

func (t *grpcTransport) listGroups(ctx context.Context, group string) ([]GroupQueue, error) {
	out, err := t.c.ListConsumerGroups(ctx, &pb.ListConsumerGroupsRequest{Group: group})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	var res []GroupQueue
	for _, g := range out.Groups {
		gq := GroupQueue{Group: g.Group, Queue: g.Queue, SubscriptionMode: g.SubscriptionMode, SubscriptionTimestamp: parseISO(g.SubscriptionTimestamp)}
		for _, p := range g.Partitions {
			gq.Partitions = append(gq.Partitions, GroupPartition{Partition: p.Partition, PartitionID: p.PartitionId,
				ConsumedOffset: p.ConsumedOffset, NewestOffset: p.NewestOffset, Pending: p.Pending,
				Lag: time.Duration(p.LagMs) * time.Millisecond, LeaseExpiresAt: parseISO(p.LeaseExpiresAt), RetryCount: p.RetryCount})
		}
		res = append(res, gq)
	}
	return res, nil
}

func (t *grpcTransport) seekGroup(ctx context.Context, group, queue, partition string, at time.Time) (*SeekResult, error) {
	in := &pb.SeekConsumerGroupRequest{Group: group, Queue: queue, Partition: partition, ToEnd: at.IsZero()}
	if !at.IsZero() {
		in.Timestamp = at.UTC().Format(time.RFC3339Nano)
	}
	out, err := t.c.SeekConsumerGroup(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return &SeekResult{PartitionsUpdated: int(out.PartitionsUpdated), CursorMovedTo: parseISO(out.CursorMovedTo)}, nil
}

func (t *grpcTransport) deleteGroup(ctx context.Context, group, queue string, keepMetadata bool) (*DeleteGroupResult, error) {
	out, err := t.c.DeleteConsumerGroup(ctx, &pb.DeleteConsumerGroupRequest{Group: group, Queue: queue, KeepMetadata: keepMetadata})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return &DeleteGroupResult{DeletedPartitions: int(out.DeletedPartitions), MetadataDeleted: out.MetadataDeleted}, nil
}

func (t *grpcTransport) listDeadLetters(ctx context.Context, f DLQFilter) (*DeadLetterPage, error) {
	in := &pb.ListDeadLettersRequest{Queue: f.Queue, ConsumerGroup: f.ConsumerGroup, Partition: f.Partition,
		Limit: int32(f.Limit), Offset: int32(f.Offset)}
	if !f.From.IsZero() {
		in.From = f.From.UTC().Format(time.RFC3339Nano)
	}
	if !f.To.IsZero() {
		in.To = f.To.UTC().Format(time.RFC3339Nano)
	}
	out, err := t.c.ListDeadLetters(ctx, in)
	if err != nil {
		return nil, wrap(ctx, err)
	}
	page := &DeadLetterPage{Total: out.Total}
	for _, d := range out.Messages {
		page.DeadLetters = append(page.DeadLetters, DeadLetterRecord{DlqID: d.DlqId, MessageID: d.Id, TransactionID: d.TransactionId,
			PartitionID: d.PartitionId, Queue: d.Queue, Partition: d.Partition, ConsumerGroup: d.ConsumerGroup, Error: d.ErrorMessage,
			RetryCount: int(d.RetryCount), Data: d.Data, CreatedAt: parseISO(d.CreatedAt), FailedAt: parseISO(d.FailedAt)})
	}
	return page, nil
}

func (t *grpcTransport) replayDeadLetter(ctx context.Context, dlqID string) (*Replay, error) {
	out, err := t.c.ReplayDeadLetter(ctx, &pb.ReplayDeadLetterRequest{DlqId: dlqID})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return &Replay{Verdict: out.Verdict, Queue: out.Queue, Partition: out.Partition, PartitionID: out.PartitionId,
		MessageID: out.MessageId, TransactionID: out.TransactionId}, nil
}

func (t *grpcTransport) purgeDeadLetters(ctx context.Context, queue, group string) (int, error) {
	out, err := t.c.PurgeDeadLetters(ctx, &pb.PurgeDeadLettersRequest{Queue: queue, ConsumerGroup: group})
	if err != nil {
		return 0, wrap(ctx, err)
	}
	return int(out.Purged), nil
}

func (t *grpcTransport) getMessage(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error) {
	out, err := t.c.GetMessage(ctx, &pb.MessageRef{PartitionId: partitionID, TransactionId: transactionID})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	m := out.Message
	return &MessageInfo{ID: m.GetId(), TransactionID: m.GetTransactionId(), PartitionID: m.GetPartitionId(), Queue: m.GetQueue(),
		Partition: m.GetPartition(), Status: m.GetStatus(), Data: out.Payload, CreatedAt: parseISO(m.GetCreatedAt())}, nil
}

func (t *grpcTransport) traces(ctx context.Context, partitionID, transactionID string) ([]Trace, error) {
	out, err := t.c.ListTraces(ctx, &pb.MessageRef{PartitionId: partitionID, TransactionId: transactionID})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	res := make([]Trace, len(out.Traces))
	for i, tr := range out.Traces {
		res[i] = Trace{ID: tr.Id, EventType: tr.EventType, Data: tr.Data, ConsumerGroup: tr.ConsumerGroup, WorkerID: tr.WorkerId,
			Names: tr.TraceNames, CreatedAt: parseISO(tr.CreatedAt)}
	}
	return res, nil
}

func (t *grpcTransport) health(ctx context.Context) (*Health, error) {
	out, err := t.c.NodeHealth(ctx, &pb.NodeHealthRequest{})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return &Health{NodeID: out.NodeId, Status: out.Status, Role: out.Role, LeaderID: out.LeaderId, Term: out.Term,
		Commit: out.Commit, Applied: out.Applied, StorageReady: out.StorageReady}, nil
}
