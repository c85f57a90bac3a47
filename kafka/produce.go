package kafka

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/kafkamsg"
	"github.com/queen-node/queen-node/request"
)

// TxnHeader is the record header whose value, when present, is the Queen
// transactionId of the message (the dedup window's key, addendum §4.6);
// without it each record gets a fresh one.
const TxnHeader = "queen-transaction-id"

// producedPartition is one partition of a Produce request on its way.
type producedPartition struct {
	resp    *kmsg.ProduceResponseTopicPartition
	batches []int // indexes into the command's batches
}

// produce appends a Produce request's batches as one entry (each
// partition's batch judged by its producer's sequence in apply), or stages
// them in their transaction. acks=0 is answered with nothing at all.
func (s *Server) produce(ctx context.Context, c *conn, r *kmsg.ProduceRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	cmd := &command.KafkaProduce{ProducerIdleUs: s.cfg.Limits.ProducerIdle.Microseconds()}
	var pending []producedPartition
	for _, t := range r.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.BaseOffset = -1
			rp.LogStartOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for ti, t := range r.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			fail := func(code int16, msg string) {
				rp.ErrorCode = code
				if msg != "" {
					rp.ErrorMessage = kmsg.StringPtr(msg)
				}
			}
			switch {
			case !visible(ctx, t.Topic):
				fail(kerr.TopicAuthorizationFailed.Code, "")
				continue
			case validTopic(t.Topic) != "":
				fail(kerr.InvalidTopicException.Code, validTopic(t.Topic))
				continue
			case p.Partition < 0:
				fail(kerr.UnknownTopicOrPartition.Code, "")
				continue
			}
			batches, err := DecodeBatches(p.Records, s.cfg.Limits.MaxFrameBytes)
			if err != nil {
				fail(decodeCode(err), err.Error())
				continue
			}
			pp := producedPartition{resp: rp}
			for _, b := range batches {
				if b.Transactional {
					if code := s.txns.stage(ctx, r.TransactionID, b, t.Topic, p.Partition); code != 0 {
						fail(code, "")
					}
					continue // staged: no offset exists before the commit
				}
				pp.batches = append(pp.batches, len(cmd.Batches))
				cmd.Batches = append(cmd.Batches, kafkaBatch(t.Topic, p.Partition, b))
			}
			if len(pp.batches) > 0 {
				pending = append(pending, pp)
			}
		}
	}
	if len(cmd.Batches) > 0 {
		if !s.cfg.Limits.NoAutoCreate {
			cmd.AutoCreatePartitions = uint32(s.cfg.Limits.DefaultPartitions)
		}
		wctx, cancel := context.WithTimeout(ctx, max(time.Duration(r.TimeoutMillis)*time.Millisecond, time.Second))
		res, _, err := s.pipe.Write(wctx, callOf(ctx), &command.Command{Body: &command.Command_KafkaProduce{KafkaProduce: cmd}})
		cancel()
		out, _ := res.(*command.KafkaProduceResult)
		for _, pp := range pending {
			for _, i := range pp.batches {
				switch {
				case err != nil || out == nil || i >= len(out.Batches):
					pp.resp.ErrorCode = codeOf(err, kerr.TopicAuthorizationFailed.Code)
				case out.Batches[i].ErrorCode != 0:
					pp.resp.ErrorCode = int16(out.Batches[i].ErrorCode)
					if out.Batches[i].Error != "" {
						pp.resp.ErrorMessage = kmsg.StringPtr(out.Batches[i].Error)
					}
				case pp.resp.BaseOffset < 0:
					pp.resp.BaseOffset = int64(out.Batches[i].BaseOffset)
				}
			}
		}
	}
	if r.Acks == 0 {
		return nil
	}
	return resp
}

// kafkaBatch is one decoded batch as the entry carries it: each record a
// push item whose payload is its kafkamsg frame.
func kafkaBatch(topic string, partition int32, b ProducedBatch) *command.KafkaBatch {
	kb := &command.KafkaBatch{Queue: topic, Partition: strconv.Itoa(int(partition)), ProducerId: b.ProducerID,
		ProducerEpoch: int32(b.ProducerEpoch), BaseSequence: b.BaseSequence}
	if b.ProducerID < 0 {
		kb.ProducerId = -1
	}
	for _, rec := range b.Records {
		kb.Items = append(kb.Items, pushItem(topic, kb.Partition, rec))
	}
	return kb
}

func pushItem(topic, partition string, rec Record) *command.PushItem {
	m := &kafkamsg.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	txn := ""
	for _, h := range rec.Headers {
		m.Headers = append(m.Headers, kafkamsg.Header{Key: h.Key, Value: h.Value})
		if h.Key == TxnHeader && len(h.Value) > 0 && len(h.Value) <= 512 {
			txn = string(h.Value)
		}
	}
	id := request.NewMessageID()
	if txn == "" {
		u, _ := uuid.FromBytes(id)
		txn = u.String()
	}
	return &command.PushItem{Queue: topic, Partition: partition, TransactionId: txn, MessageId: id, Payload: kafkamsg.Append(nil, m)}
}

// decodeCode is the Kafka error code of a batch that does not decode.
func decodeCode(err error) int16 {
	switch {
	case errors.Is(err, ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, ErrUnsupportedCodec):
		return kerr.UnsupportedCompressionType.Code
	}
	return kerr.CorruptMessage.Code
}
