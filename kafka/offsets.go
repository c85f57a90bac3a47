package kafka

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/request"
)

// A Kafka group's committed offset of a partition is its Queen consumer
// group's position there (addendum §4.2): committed offset N is "the next
// to read is N", cursor consumed = N-1. So the consumer-group views, ctl,
// the dashboard and seek see Kafka groups, and a group's name belongs to
// Kafka or to Queen by its first use in a queue.

// maxMetadata is what a position keeps with the cursor (addendum §4.2).
const maxMetadata = 4096

// validGroup says why a name cannot be a Kafka group's ("" when it can).
func validGroup(g string) string {
	switch {
	case g == "":
		return "a group id is not empty"
	case g == command.QueueModeGroup:
		return g + " is Queen's queue mode, not a group"
	case len(g) > request.MaxNameBytes:
		return "a group id is at most " + strconv.Itoa(request.MaxNameBytes) + " bytes"
	}
	return ""
}

// commitItem is one partition's commit on its way.
type commitItem struct {
	code *int16
	op   *command.PositionOp
}

// commitPositions writes positions as one transaction (guard: a Kafka
// producer's commit, else nil) and sets each item's code.
func (s *Server) commitPositions(ctx context.Context, items []commitItem, guard *command.KafkaTxnGuard, pushes []*command.TxnOp) int16 {
	txn := &command.Transaction{TransactionId: request.NewMessageID(), Kafka: guard, Ops: pushes}
	for _, it := range items {
		if *it.code == 0 {
			txn.Positions = append(txn.Positions, it.op)
		}
	}
	if len(txn.Positions) == 0 && len(pushes) == 0 {
		return 0
	}
	res, _, err := s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_Transaction{Transaction: txn}})
	code := codeOf(err, kerr.GroupAuthorizationFailed.Code)
	if out, ok := res.(*command.TxnResult); ok && err == nil && !out.Success {
		switch out.Reason {
		case command.Reason_GROUP_KIND:
			s.log.Warn("kafka: a commit refused", "reason", out.Error)
			code = kerr.InvalidGroupID.Code
		case command.Reason_PRODUCER_FENCED:
			code = kerr.ProducerFenced.Code
		case command.Reason_COORDINATOR_MOVED:
			s.log.Warn("kafka: a transaction's commit refused: its coordinator lost the lead", "error", out.Error)
			code = kerr.TransactionAbortable.Code
		case command.Reason_QUEUE_NOT_FOUND:
			code = kerr.UnknownTopicOrPartition.Code
		case command.Reason_TOO_LARGE:
			code = kerr.OffsetMetadataTooLarge.Code
		default:
			s.log.Warn("kafka: a commit refused", "reason", out.Reason.String(), "error", out.Error)
			code = kerr.UnknownServerError.Code
		}
	}
	for _, it := range items {
		if *it.code == 0 {
			*it.code = code
		}
	}
	return code
}

// positionOp is a Kafka commit of offset in partition n of topic.
func positionOp(group, topic string, partition int32, offset int64, metadata *string) *command.PositionOp {
	op := &command.PositionOp{Queue: topic, ConsumerGroup: group, Partition: strconv.Itoa(int(partition)),
		Offset: uint64(max(offset, 0)), KafkaGroup: true, Subscription: command.Pop_DEFAULT_ALL}
	if metadata != nil {
		op.Metadata = []byte(*metadata)
	}
	return op
}

// checkPartitions sets each item's code for what a commit may not name:
// a topic the token does not reach, one that is not there, metadata over
// its limit.
func (s *Server) checkPartitions(ctx context.Context, items []commitItem) {
	_ = s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, it := range items {
			n, _ := strconv.Atoi(it.op.Partition)
			switch _, ok := topicPartition(rd, it.op.Queue, int32(n)); {
			case !visible(ctx, it.op.Queue):
				*it.code = kerr.TopicAuthorizationFailed.Code
			case !ok:
				*it.code = kerr.UnknownTopicOrPartition.Code
			case len(it.op.Metadata) > maxMetadata:
				*it.code = kerr.OffsetMetadataTooLarge.Code
			}
		}
		return nil
	})
}

func (s *Server) offsetCommit(ctx context.Context, r *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	var items []commitItem
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	groupCode := int16(0)
	if why := validGroup(r.Group); why != "" {
		groupCode = kerr.InvalidGroupID.Code
	} else {
		groupCode = s.groups.checkGeneration(ctx, r.Group, r.MemberID, r.Generation)
	}
	for ti, t := range r.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			rp.Partition = p.Partition
			rp.ErrorCode = groupCode
			items = append(items, commitItem{code: &rp.ErrorCode, op: positionOp(r.Group, t.Topic, p.Partition, p.Offset, p.Metadata)})
		}
	}
	s.checkPartitions(ctx, items)
	s.commitPositions(ctx, items, nil, nil)
	return resp
}

func (s *Server) offsetFetch(ctx context.Context, r *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, g := range r.Groups {
			var topics []kmsg.OffsetFetchRequestTopic
			if g.Topics != nil {
				topics = []kmsg.OffsetFetchRequestTopic{}
				for _, t := range g.Topics {
					topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			tops, code := s.committed(ctx, g.Group, topics, r.RequireStable)
			rg.ErrorCode = code
			for _, t := range tops {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition,
						Offset: p.Offset, LeaderEpoch: -1, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	tops, code := s.committed(ctx, r.Group, r.Topics, r.RequireStable)
	resp.Topics, resp.ErrorCode = tops, code
	return resp
}

// committed reads a group's committed offsets of the topics named (nil:
// every topic where it has one), linearizably: a consumer that committed
// and restarted reads its commit. With stable (RequireStable, KIP-447) a
// partition an open transaction has staged offsets for is answered
// UNSTABLE_OFFSET_COMMIT (retriable) until that transaction ends: a
// consumer taking a partition over from a transactional one starts from
// the offset its commit or abort leaves, never from one it is about to move.
func (s *Server) committed(ctx context.Context, group string, topics []kmsg.OffsetFetchRequestTopic, stable bool) ([]kmsg.OffsetFetchResponseTopic, int16) {
	if validGroup(group) != "" {
		return nil, kerr.InvalidGroupID.Code
	}
	if !s.leads(ctx) {
		return nil, kerr.NotCoordinator.Code
	}
	var out []kmsg.OffsetFetchResponseTopic
	err := s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
		if topics == nil {
			for _, gq := range rd.ConsumerGroups(group, s.node.Now()) {
				if gq.Subscription == nil || !gq.Subscription.Kafka || !visible(ctx, gq.Queue) {
					continue
				}
				t := kmsg.OffsetFetchRequestTopic{Topic: gq.Queue}
				for _, p := range gq.Partitions {
					if n, err := strconv.Atoi(p.Partition); err == nil {
						t.Partitions = append(t.Partitions, int32(n))
					}
				}
				topics = append(topics, t)
			}
		}
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			g := rd.Group(t.Topic, group)
			for _, n := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = n, -1, -1
				part, ok := topicPartition(rd, t.Topic, n)
				switch {
				case !visible(ctx, t.Topic):
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case g != nil && !g.Kafka:
					rp.ErrorCode = kerr.InvalidGroupID.Code // a Queen group's name
				case !ok:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case stable && s.txns.pendingOffsets(ctx, group, t.Topic, n):
					rp.ErrorCode = kerr.UnstableOffsetCommit.Code
				default:
					if cur := rd.Cursor(part.Id, group); cur != nil {
						rp.Offset = int64(max(cur.Consumed, part.FirstSeq-1)) + 1
						rp.Metadata = kmsg.StringPtr(string(cur.PositionMetadata))
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			out = append(out, rt)
		}
		return nil
	})
	return out, codeOf(err, kerr.GroupAuthorizationFailed.Code)
}

func (s *Server) listGroups(ctx context.Context, r *kmsg.ListGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	if !s.leads(ctx) {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	// the tenant's groups alone: those its coordinator holds, then those
	// with committed offsets in its state (Read with ctx reads only the
	// tenant's)
	seen := map[string]bool{}
	for _, g := range s.groups.states(ctx) {
		seen[g.Group] = true
		resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g.Group, ProtocolType: g.ProtocolType, GroupState: g.State})
	}
	_ = s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, gq := range rd.ConsumerGroups("", 0) {
			if gq.Subscription != nil && gq.Subscription.Kafka && !seen[gq.Group] && visible(ctx, gq.Queue) {
				seen[gq.Group] = true
				resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: gq.Group, ProtocolType: "consumer", GroupState: "Empty"})
			}
		}
		return nil
	})
	return resp
}

// deleteGroups deletes a Kafka group's positions in every queue where it
// is a Kafka group (a Queen group of the same name elsewhere stays).
func (s *Server) deleteGroups(ctx context.Context, r *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		switch {
		case validGroup(g) != "":
			rg.ErrorCode = kerr.InvalidGroupID.Code
		case !s.leads(ctx):
			rg.ErrorCode = kerr.NotCoordinator.Code
		default:
			rg.ErrorCode = s.groups.drop(ctx, g)
		}
		if rg.ErrorCode == 0 {
			var queues []string
			_ = s.node.Read(ctx, cluster.Linearizable, func(rd *fsm.Reader) error {
				for _, gq := range rd.ConsumerGroups(g, 0) {
					if gq.Subscription != nil && gq.Subscription.Kafka {
						queues = append(queues, gq.Queue)
					}
				}
				return nil
			})
			if len(queues) == 0 {
				rg.ErrorCode = kerr.GroupIDNotFound.Code
			}
			for _, q := range queues {
				_, _, err := s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_DeleteGroup{
					DeleteGroup: &command.DeleteGroup{Group: g, Queue: q, DeleteMetadata: true}}})
				if code := codeOf(err, kerr.GroupAuthorizationFailed.Code); code != 0 {
					rg.ErrorCode = code
					break
				}
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
