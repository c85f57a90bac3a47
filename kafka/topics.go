package kafka

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
)

// CreateTopics makes queues with partitions "0".."n-1" in one entry;
// replication factor and replica assignments are the cluster's (every
// voter holds every partition), so only -1 or the voter count is taken.
func (s *Server) createTopics(ctx context.Context, r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	cmd := &command.KafkaCreateTopics{ValidateOnly: r.ValidateOnly}
	at := map[string]int{}
	for _, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
		fail := func(code int16, msg string) {
			rt.ErrorCode = code
			rt.ErrorMessage = kmsg.StringPtr(msg)
		}
		parts := t.NumPartitions
		if parts == -1 {
			parts = int32(s.cfg.Limits.DefaultPartitions)
			rt.NumPartitions = parts
		}
		switch {
		case validTopic(t.Topic) != "":
			fail(kerr.InvalidTopicException.Code, validTopic(t.Topic))
		case !visible(ctx, t.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, "the token does not reach this topic")
		case len(t.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment.Code, "every voter of the cluster holds every partition: no assignment is taken")
		case parts <= 0 || parts > 10_000:
			fail(kerr.InvalidPartitions.Code, "a topic has 1 to 10000 partitions")
		case at[t.Topic] > 0:
			fail(kerr.InvalidRequest.Code, "the topic is named twice")
		default:
			cmd.Topics = append(cmd.Topics, &command.KafkaTopic{Name: t.Topic, Partitions: uint32(parts)})
			at[t.Topic] = len(resp.Topics) + 1
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(cmd.Topics) == 0 {
		return resp
	}
	res, _, err := s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_KafkaCreateTopics{KafkaCreateTopics: cmd}})
	out, _ := res.(*command.KafkaCreateTopicsResult)
	for i, t := range cmd.Topics {
		rt := &resp.Topics[at[t.Name]-1]
		switch {
		case err != nil || out == nil || i >= len(out.Topics):
			rt.ErrorCode = codeOf(err, kerr.TopicAuthorizationFailed.Code)
		case out.Topics[i].ErrorCode != 0:
			rt.ErrorCode, rt.ErrorMessage = int16(out.Topics[i].ErrorCode), kmsg.StringPtr(out.Topics[i].Error)
		}
	}
	return resp
}

// DeleteTopics deletes the queues (an admin's call, as DELETE
// /api/v1/resources/queues/:q is); a queue that is not a topic is not
// touched.
func (s *Server) deleteTopics(ctx context.Context, r *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := r.TopicNames
	if r.Version >= 6 {
		names = nil
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	tops, _ := s.topics(ctx, names)
	for i, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		switch {
		case !visible(ctx, name):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case i >= len(tops) || tops[i].width == 0:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			_, _, err := s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_DeleteQueue{
				DeleteQueue: &command.DeleteQueue{Queue: name}}})
			rt.ErrorCode = codeOf(err, kerr.TopicAuthorizationFailed.Code)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describeConfigs answers topic configs from the queue's options (what a
// Kafka client may ask: retention, the cleanup policy) and broker configs
// with the few a client reads; every config is read-only here (queue
// options are set with /api/v1/configure).
func (s *Server) describeConfigs(ctx context.Context, r *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	_ = s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, res := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
			var configs map[string]string
			switch res.ResourceType {
			case kmsg.ConfigResourceTypeTopic:
				q := rd.Queue(res.ResourceName)
				if _, ok := queue.TopicWidth(rd.Partitions(res.ResourceName)); q == nil || !ok {
					rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
					break
				}
				if !visible(ctx, res.ResourceName) {
					rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
					break
				}
				retention := int64(-1)
				if sec := q.Options.GetRetentionSeconds(); sec > 0 {
					retention = int64(sec) * 1000
				}
				configs = map[string]string{"cleanup.policy": "delete", "retention.ms": strconv.FormatInt(retention, 10),
					"message.timestamp.type": "CreateTime", "max.message.bytes": strconv.Itoa(s.cfg.Limits.MaxFrameBytes)}
			case kmsg.ConfigResourceTypeBroker:
				configs = map[string]string{"auto.create.topics.enable": strconv.FormatBool(!s.cfg.Limits.NoAutoCreate),
					"num.partitions": strconv.Itoa(s.cfg.Limits.DefaultPartitions), "message.max.bytes": strconv.Itoa(s.cfg.Limits.MaxFrameBytes)}
			default:
				rr.ErrorCode = kerr.InvalidRequest.Code
			}
			for _, k := range slices.Sorted(maps.Keys(configs)) {
				if res.ConfigNames != nil && !slices.Contains(res.ConfigNames, k) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.ReadOnly = k, kmsg.StringPtr(configs[k]), true
				c.Source = kmsg.ConfigSourceDefaultConfig
				rr.Configs = append(rr.Configs, c)
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return nil
	})
	return resp
}
