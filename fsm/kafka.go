package fsm

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/producers"
)

// The Kafka listener's commands (package kafka): producer ids, produced
// batches (each partition's judged by its producer's sequence, package
// producers), and topics made whole. A transactional producer's commit is
// a Transaction with a KafkaTxnGuard (txn.go).

func applyKafkaInitProducer(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	return producers.Init(c.tx, cmd.GetKafkaInitProducer(), c.now), true
}

// applyKafkaProduce appends each batch whole or not at all: a batch its
// producer already appended (a retry, also one that reached a new leader)
// is answered with its first offset and not appended again.
func applyKafkaProduce(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetKafkaProduce()
	res := &command.KafkaProduceResult{Batches: make([]*command.KafkaBatchResult, len(in.Batches))}
	// A request carries a batch per partition, mostly of one topic: whether
	// a queue is a topic (a walk over its partitions) is judged once per
	// command. Appending to a topic's partitions keeps it one.
	topics := map[string]bool{}
	for i, b := range in.Batches {
		res.Batches[i] = c.kafkaBatch(b, in, topics)
	}
	return res, true
}

func (c *applyCtx) kafkaBatch(b *command.KafkaBatch, in *command.KafkaProduce, topics map[string]bool) *command.KafkaBatchResult {
	r := &command.KafkaBatchResult{}
	fail := func(code int16, text string) *command.KafkaBatchResult {
		r.ErrorCode, r.Error = int32(code), text
		return r
	}
	if c.meta.PushMaintenance || c.q.Buffered() {
		// a buffered push has no offset to answer with: the client retries
		return fail(kerr.LeaderNotAvailable.Code, "push maintenance is on: retry")
	}
	if !topics[b.Queue] {
		if _, exists, _ := c.q.Topic(b.Queue); !exists && in.AutoCreatePartitions > 0 {
			c.q.MakeTopic(b.Queue, int(in.AutoCreatePartitions))
		}
		if width, _, ok := c.q.Topic(b.Queue); !ok || width == 0 {
			return fail(kerr.UnknownTopicOrPartition.Code, "topic "+b.Queue+" does not exist or is not a Kafka topic")
		}
		topics[b.Queue] = true
	}
	pid, _, ok := c.q.PartitionNamed(b.Queue, b.Partition)
	if !ok {
		return fail(kerr.UnknownTopicOrPartition.Code, "topic "+b.Queue+" has no partition "+b.Partition)
	}
	n := int32(len(b.Items))
	var v producers.Verdict
	if b.ProducerId >= 0 {
		v = producers.Check(c.tx, b.ProducerId, b.ProducerEpoch, pid, b.BaseSequence, n)
		if v.Code != 0 {
			return fail(v.Code, "")
		}
		if v.Duplicate {
			r.Duplicate, r.BaseOffset = true, v.BaseOffset
			return r
		}
	}
	if why := c.q.Room(b.Queue, len(b.Items)); why != "" {
		return fail(kerr.PolicyViolation.Code, why)
	}
	for j, it := range b.Items {
		pr := c.q.Push(it)
		if j == 0 || r.BaseOffset == 0 {
			r.BaseOffset = pr.Offset
		}
	}
	if b.ProducerId >= 0 {
		producers.Appended(c.tx, v, b.ProducerId, b.ProducerEpoch, pid, b.BaseSequence, n, r.BaseOffset, c.now, in.ProducerIdleUs)
	}
	return r
}

func applyKafkaCreateTopics(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetKafkaCreateTopics()
	res := &command.KafkaCreateTopicsResult{}
	made := false
	for _, t := range in.Topics {
		r := &command.KafkaTopicResult{Name: t.Name}
		res.Topics = append(res.Topics, r)
		if _, exists, _ := c.q.Topic(t.Name); exists {
			r.ErrorCode, r.Error = int32(kerr.TopicAlreadyExists.Code), "topic "+t.Name+" already exists"
			continue
		}
		if t.Partitions == 0 {
			r.ErrorCode, r.Error = int32(kerr.InvalidPartitions.Code), "a topic needs at least one partition"
			continue
		}
		if !in.ValidateOnly {
			c.q.MakeTopic(t.Name, int(t.Partitions))
			made = true
		}
	}
	return res, made
}

// kafkaProduceTouches names the topics of a produce.
func kafkaProduceTouches(cmd *command.Command, touch func(Touch)) {
	for _, b := range cmd.GetKafkaProduce().Batches {
		touch(Queue(b.Queue))
	}
}

func kafkaProducePayloads(cmd *command.Command, push func(*command.PushItem), _ func(*command.TimerOp)) {
	for _, b := range cmd.GetKafkaProduce().Batches {
		for _, it := range b.Items {
			push(it)
		}
	}
}
