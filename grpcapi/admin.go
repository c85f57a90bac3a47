package grpcapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/request"
)

// The operator's calls over gRPC: the node's health, consumer-group admin
// and the dead-letter list (spec §4.10, §4.11, addendum §4.13), through
// the same rules and commands as their HTTP routes.

// NodeHealth is /health's status and raft object.
func (s *Public) NodeHealth(context.Context, *queenpb.NodeHealthRequest) (*queenpb.NodeHealthResponse, error) {
	st := s.node.Status()
	out := &queenpb.NodeHealthResponse{NodeId: s.node.ID(), Status: "healthy", Role: st.Role, LeaderId: st.LeaderID,
		Term: st.Term, Commit: st.CommitIndex, Applied: st.StateApplied, StorageReady: st.StorageReady,
		ClusterVersion: st.ClusterVersion, ApplyFailure: st.ApplyFailure}
	switch {
	case st.Damage != nil:
		out.Status = "damaged"
	case !s.node.Ready():
		out.Status = "settling"
	}
	return out, nil
}

// ListConsumerGroups lists (group, queue) rows; a scoped token sees its
// own queues only.
func (s *Public) ListConsumerGroups(ctx context.Context, in *queenpb.ListConsumerGroupsRequest) (*queenpb.ListConsumerGroupsResponse, error) {
	now := s.node.Now()
	var gqs []queue.GroupQueue
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		for _, gq := range rd.ConsumerGroups(in.Group, now) {
			if auth.InScope(ctx, gq.Queue) {
				gqs = append(gqs, gq)
			}
		}
		return nil
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	out := &queenpb.ListConsumerGroupsResponse{}
	for _, gq := range gqs {
		row := &queenpb.ConsumerGroupQueue{Group: gq.Group, Queue: gq.Queue}
		if sub := gq.Subscription; sub != nil {
			row.SubscriptionMode = "all"
			if sub.Mode == command.GroupRecord_FROM {
				row.SubscriptionMode, row.SubscriptionTimestamp = "timestamp", isoOrEmpty(sub.FromUs)
			}
		}
		for _, p := range gq.Partitions {
			gp := &queenpb.ConsumerGroupPartition{Partition: p.Partition, PartitionId: uuidStr(p.PartitionID),
				ConsumedOffset: p.Consumed, NewestOffset: p.Last, Pending: p.Pending, LagMs: p.LagUs(now) / 1000, RetryCount: p.RetryCount}
			if p.Lease != nil {
				gp.LeaseExpiresAt = isoOrEmpty(p.Lease.ExpiresUs)
			}
			row.Partitions = append(row.Partitions, gp)
		}
		out.Groups = append(out.Groups, row)
	}
	return out, nil
}

// SeekConsumerGroup is POST .../seek: a queue to its end or a time, or one
// partition to its end. NOT_FOUND when the queue (or partition) is not there.
func (s *Public) SeekConsumerGroup(ctx context.Context, in *queenpb.SeekConsumerGroupRequest) (*queenpb.SeekConsumerGroupResponse, error) {
	var seek *command.Seek
	var err error
	if in.Partition != "" {
		seek, err = request.SeekPartition(in.Group, in.Queue, in.Partition)
	} else {
		seek, err = request.Seek(in.Group, in.Queue, in.ToEnd, in.Timestamp, in.Timestamp != "")
	}
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.SeekResult](s, ctx, nil, &command.Command{Body: &command.Command_Seek{Seek: seek}})
	if err != nil {
		return nil, err
	}
	switch {
	case !res.QueueFound:
		return nil, status.Error(codes.NotFound, "Queue not found: "+in.Queue)
	case in.Partition != "" && !res.PartitionFound:
		return nil, status.Error(codes.NotFound, "Partition not found")
	}
	return &queenpb.SeekConsumerGroupResponse{QueueFound: res.QueueFound, PartitionFound: res.PartitionFound,
		PartitionsUpdated: res.PartitionsUpdated, CursorMovedTo: isoOrEmpty(res.CursorMovedToUs)}, nil
}

// DeleteConsumerGroup deletes a group's cursors in one queue, or in every
// queue when none is named.
func (s *Public) DeleteConsumerGroup(ctx context.Context, in *queenpb.DeleteConsumerGroupRequest) (*queenpb.DeleteConsumerGroupResponse, error) {
	d, err := request.DeleteGroup(in.Group, in.Queue, in.Queue == "", !in.KeepMetadata)
	if err != nil {
		return nil, publicStatus(err)
	}
	res, err := propose[*command.DeleteGroupResult](s, ctx, nil, &command.Command{Body: &command.Command_DeleteGroup{DeleteGroup: d}})
	if err != nil {
		return nil, err
	}
	return &queenpb.DeleteConsumerGroupResponse{DeletedPartitions: res.DeletedPartitions, MetadataDeleted: res.MetadataDeleted}, nil
}

// ListDeadLetters lists dead letters, newest failure first; a scoped token
// names its queue (as on GET /api/v1/dlq).
func (s *Public) ListDeadLetters(ctx context.Context, in *queenpb.ListDeadLettersRequest) (*queenpb.ListDeadLettersResponse, error) {
	if id := auth.IdentityFrom(ctx); id.Scoped() && (in.Queue == "" || !id.Touches(in.Queue)) {
		return nil, status.Error(codes.PermissionDenied, auth.ErrInsufficient.Msg)
	}
	f := fsm.DLQFilter{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup, Partition: in.Partition,
		Limit: int(in.Limit), Offset: int(max(in.Offset, 0))}
	for _, t := range []struct {
		v   string
		dst *int64
	}{{in.From, &f.FromUs}, {in.To, &f.ToUs}} {
		if t.v == "" {
			continue
		}
		us, ok := request.ParseTime(t.v)
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "from and to must be ISO-8601 times")
		}
		*t.dst = us
	}
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = 100
	}
	var recs []*command.DLQRecord
	var total int
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) (err error) {
		recs, total, err = rd.DeadLetters(f)
		return err
	})
	if err != nil {
		return nil, publicStatus(err)
	}
	out := &queenpb.ListDeadLettersResponse{Total: int64(total)}
	for _, d := range recs {
		out.Messages = append(out.Messages, &queenpb.DeadLetter{DlqId: queue.DeadLetterID(d.RecordId), Id: uuidStr(d.MessageId),
			TransactionId: d.TransactionId, PartitionId: uuidStr(d.PartitionId), Queue: d.Queue, Partition: d.Partition,
			ConsumerGroup: d.ConsumerGroup, ErrorMessage: d.Error, RetryCount: d.RetryCount, Data: d.Payload,
			CreatedAt: isoOrEmpty(d.CreatedUs), FailedAt: isoOrEmpty(d.FailedUs)})
	}
	return out, nil
}
