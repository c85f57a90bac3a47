package kafka

import (
	"context"
	"hash/fnv"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
)

// BrokerID is a node's Kafka broker id: a stable integer derived from its
// node id (FNV-1a, 31 bits), the same on every node and across restarts.
func BrokerID(nodeID string) int32 {
	h := fnv.New32a()
	h.Write([]byte(nodeID))
	return int32(h.Sum32() & 0x7fffffff)
}

type broker struct {
	id    int32
	host  string
	port  int32
	voter bool
	alive bool
}

// brokers are the nodes of the cluster whose Kafka listener is on, and the
// broker id of the leader of the Raft group of the tenant ctx carries (-1:
// no leader known, or its listener is off). With --raft-groups N > 1 each
// tenant's leader may be another node: its partitions, groups and
// transactions are that node's.
func (s *Server) brokers(ctx context.Context) ([]broker, int32) {
	v := s.node.Cluster()
	leaderID := s.node.StatusOf(ctx).LeaderID
	leader := int32(-1)
	var out []broker
	for _, n := range v.Nodes {
		addr := n.KafkaAddr
		if n.ID == s.node.ID() {
			addr = s.cfg.Advertised
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		p, _ := strconv.Atoi(port)
		b := broker{id: BrokerID(n.ID), host: host, port: int32(p), voter: n.Voter, alive: n.Alive}
		out = append(out, b)
		if leaderID != "" && n.ID == leaderID {
			leader = b.id
		}
	}
	return out, leader
}

// topicView is a queue as Kafka sees it.
type topicView struct {
	name  string
	width int
}

// topics reads the topics among the queues (all, or those named; a named
// one that is missing or not a topic has width 0).
func (s *Server) topics(ctx context.Context, names []string) ([]topicView, error) {
	var out []topicView
	err := s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		width := func(q string) int {
			w, ok := queue.TopicWidth(rd.Partitions(q))
			if !ok || rd.Queue(q) == nil {
				return 0
			}
			return w
		}
		if names == nil {
			for _, q := range rd.QueueNames() {
				if w := width(q); w > 0 {
					out = append(out, topicView{q, w})
				}
			}
			return nil
		}
		for _, q := range names {
			out = append(out, topicView{q, width(q)})
		}
		return nil
	})
	return out, err
}

// visible reports whether the caller's token reaches a topic.
func visible(ctx context.Context, topic string) bool {
	id := auth.IdentityFrom(ctx)
	return id == nil || !id.Scoped() || id.Touches(topic)
}

func (s *Server) metadata(ctx context.Context, r *kmsg.MetadataRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	bs, leader := s.brokers(ctx)
	var voters []int32
	for _, b := range bs {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.id, Host: b.host, Port: b.port})
		if b.voter {
			voters = append(voters, b.id)
		}
	}
	resp.ControllerID = leader
	resp.ClusterID = kmsg.StringPtr("queen-node")

	var names []string
	if r.Topics != nil {
		names = []string{}
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	tops, err := s.topics(ctx, names)
	if err != nil {
		tops = nil
	}
	autoCreate := !s.cfg.Limits.NoAutoCreate && (r.Version < 4 || r.AllowAutoTopicCreation)
	var create []*command.KafkaTopic
	for i, t := range tops {
		if t.width == 0 && autoCreate && validTopic(t.name) == "" && visible(ctx, t.name) {
			create = append(create, &command.KafkaTopic{Name: t.name, Partitions: uint32(s.cfg.Limits.DefaultPartitions)})
			tops[i].width = s.cfg.Limits.DefaultPartitions
		}
	}
	if len(create) > 0 {
		// topics already there (a race) are fine: their width is re-read
		_, _, _ = s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_KafkaCreateTopics{
			KafkaCreateTopics: &command.KafkaCreateTopics{Topics: create}}})
		if again, err := s.topics(ctx, names); err == nil {
			tops = again
		}
	}
	for _, t := range tops {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(t.name)
		switch {
		case !visible(ctx, t.name):
			if names == nil {
				continue // a listing leaves out what the token does not reach
			}
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t.width == 0:
			if names == nil {
				continue
			}
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		for p := 0; p < t.width && mt.ErrorCode == 0; p++ {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(p)
			mp.Leader = leader
			mp.LeaderEpoch = -1
			mp.Replicas = voters
			mp.ISR = voters
			if leader < 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (s *Server) findCoordinator(ctx context.Context, r *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	bs, leader := s.brokers(ctx)
	answer := func(key string) (int32, string, int32, int16) {
		for _, b := range bs {
			if b.id == leader {
				return b.id, b.host, b.port, 0
			}
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, k := range keys {
		id, host, port, code := answer(k)
		if r.Version < 4 {
			resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = id, host, port, code
			break
		}
		resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
			Key: k, NodeID: id, Host: host, Port: port, ErrorCode: code})
	}
	return resp
}

// validTopic says why a name cannot be a Kafka topic ("" when it can):
// Kafka's rule, 1..249 of [a-zA-Z0-9._-], not "." or "..".
func validTopic(name string) string {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return "a topic name is 1 to 249 characters, not \".\" or \"..\""
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "a topic name holds only ASCII letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}
