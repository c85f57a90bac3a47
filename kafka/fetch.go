package kafka

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/kafkamsg"
)

// fetch reads each partition from its offset, without a lease, from this
// node's applied state (committed entries only: a follower may be behind
// the leader, never ahead of the log). Until min_bytes are there it waits
// up to max_wait_ms, woken by the applied pushes of its topics, never by
// polling. read_committed and read_uncommitted read the same records: a
// transaction's records are appended only by its commit entry, so there
// is nothing uncommitted to skip.
func (s *Server) fetch(ctx context.Context, r *kmsg.FetchRequest) kmsg.Response {
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, s.cfg.Limits.MaxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		watch := s.watchTopics(ctx, r)
		resp, n := s.fetchOnce(ctx, r)
		left := time.Until(deadline)
		if n >= int(max(r.MinBytes, 1)) || left <= 0 {
			return resp
		}
		timer := time.NewTimer(left)
		select {
		case <-watch:
		case <-timer.C:
		case <-ctx.Done():
		case <-s.done:
		}
		timer.Stop()
		if ctx.Err() != nil || time.Until(deadline) <= 0 {
			resp, _ = s.fetchOnce(ctx, r)
			return resp
		}
	}
}

// watchTopics is closed at the next applied change of a fetched topic
// (any topic when the fetch names several).
func (s *Server) watchTopics(ctx context.Context, r *kmsg.FetchRequest) <-chan struct{} {
	if len(r.Topics) == 1 {
		return s.node.Watch(ctx, r.Topics[0].Topic)
	}
	return s.node.Watch(ctx, "")
}

func (s *Server) fetchOnce(ctx context.Context, r *kmsg.FetchRequest) (*kmsg.FetchResponse, int) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	budget := int(r.MaxBytes)
	if r.Version < 3 || budget <= 0 {
		budget = s.cfg.Limits.MaxFrameBytes
	}
	budget = min(budget, s.cfg.Limits.MaxFrameBytes)
	total := 0
	err := s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rp.PreferredReadReplica = -1
				rp.RecordBatches = []byte{}
				if !visible(ctx, t.Topic) {
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				} else {
					n := fetchPartition(rd, t.Topic, p, &rp, min(int(p.PartitionMaxBytes), budget-total), total == 0)
					total += n
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return nil
	})
	if err != nil {
		resp.ErrorCode = codeOf(err, kerr.TopicAuthorizationFailed.Code)
	}
	return resp, total
}

// fetchPartition fills one partition's answer and returns the record
// bytes it holds. The first record always goes, however large (KIP-74),
// when it is the first of the answer.
func fetchPartition(rd *fsm.Reader, topic string, p kmsg.FetchRequestTopicPartition, rp *kmsg.FetchResponseTopicPartition, budget int, first bool) int {
	part, ok := topicPartition(rd, topic, p.Partition)
	if !ok {
		rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return 0
	}
	high := int64(part.NextSeq)
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = high, high, int64(part.FirstSeq)
	if p.FetchOffset < int64(part.FirstSeq) || p.FetchOffset > high {
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	var recs []FetchedRecord
	size := 0
	const step = 256
	for from := uint64(p.FetchOffset); from < part.NextSeq && (size < budget || first && len(recs) == 0); from += step {
		to := min(from+step-1, part.NextSeq-1)
		ms, err := rd.StoredMessages(part.Id, from, to)
		if err != nil {
			if len(recs) == 0 {
				rp.ErrorCode = kerr.KafkaStorageError.Code
				return 0
			}
			break
		}
		for i, m := range ms {
			seq := from + uint64(i)
			if part.Deleted > 0 && rd.Deleted(part, seq) {
				continue
			}
			rec := recordOf(m)
			n := len(rec.Key) + len(rec.Value) + 32
			if size+n > budget && !(first && len(recs) == 0) {
				size = budget // full
				break
			}
			size += n
			recs = append(recs, FetchedRecord{Offset: int64(seq), Record: rec})
		}
		if len(ms) < int(to-from+1) {
			break
		}
	}
	// an empty answer is zero bytes, never null: librdkafka cannot parse a null record set
	rp.RecordBatches = AppendBatch([]byte{}, recs)
	return len(rp.RecordBatches)
}

// topicPartition is partition n of a topic, if the queue is a topic.
func topicPartition(rd *fsm.Reader, topic string, n int32) (*command.PartitionRecord, bool) {
	if n < 0 || rd.Queue(topic) == nil {
		return nil, false
	}
	p := rd.PartitionNamed(topic, strconv.Itoa(int(n)))
	return p, p != nil
}

// recordOf is a stored message as a Kafka record: a Kafka record's frame
// as it was produced; a message pushed over Queen's APIs with its JSON
// payload as the value, no key, its createdAt as the timestamp.
func recordOf(m *command.MessageRecord) Record {
	if kafkamsg.IsFrame(m.Payload) {
		if f, err := kafkamsg.Parse(m.Payload); err == nil {
			rec := Record{Key: f.Key, Value: f.Value, Timestamp: f.Timestamp}
			for _, h := range f.Headers {
				rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value})
			}
			return rec
		}
	}
	return Record{Value: m.Payload, Timestamp: m.CreatedUs / 1000}
}

func (s *Server) listOffsets(ctx context.Context, r *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	err := s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				rp.LeaderEpoch = -1
				rp.Timestamp = -1
				part, ok := topicPartition(rd, t.Topic, p.Partition)
				switch {
				case !visible(ctx, t.Topic):
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case !ok:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case p.Timestamp == -1: // latest
					rp.Offset = int64(part.NextSeq)
				case p.Timestamp == -2: // earliest
					rp.Offset = int64(part.FirstSeq)
				case p.Timestamp == -3: // the record with the largest timestamp: the newest, by append time
					rp.Offset = int64(part.NextSeq)
					if part.NextSeq > part.FirstSeq {
						rp.Offset = int64(part.NextSeq - 1)
						rp.Timestamp = part.LastCreatedUs / 1000
					}
				case p.Timestamp < 0:
					rp.ErrorCode = kerr.InvalidRequest.Code
				default: // the first offset appended at or after the timestamp
					seq := rd.FirstAtOrAfter(part, p.Timestamp*1000)
					rp.Offset = int64(seq)
					if seq < part.NextSeq {
						if ms, err := rd.StoredMessages(part.Id, seq, seq); err == nil && len(ms) == 1 {
							rp.Timestamp = recordOf(ms[0]).Timestamp
						}
					} else {
						rp.Offset = -1 // none: Kafka answers -1
					}
				}
				if r.Version == 0 {
					rp.OldStyleOffsets = []int64{rp.Offset}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return nil
	})
	if err != nil {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = codeOf(err, kerr.TopicAuthorizationFailed.Code)
			}
		}
	}
	return resp
}
