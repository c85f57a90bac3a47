package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf is a request as a client writes it, without the size prefix.
func frameOf(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func seedRequests() [][]byte {
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = AppendBatch(nil, []FetchedRecord{{Offset: 0, Record: Record{Key: []byte("k"), Value: []byte("v")}}})
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	fetch := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = "g"
	return [][]byte{
		frameOf(kmsg.NewPtrApiVersionsRequest(), 3), frameOf(kmsg.NewPtrMetadataRequest(), 12),
		frameOf(produce, 9), frameOf(produce, 3), frameOf(fetch, 12), frameOf(fetch, 4), frameOf(join, 9),
		frameOf(kmsg.NewPtrOffsetCommitRequest(), 8), frameOf(kmsg.NewPtrEndTxnRequest(), 3),
	}
}

// Every request a client could send decodes without a panic, and a
// decoded produce's record batches do too.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := decodeRequest(frame)
		if err != nil || req == nil {
			return
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("decoded %d v%d from a frame naming %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
		if p, ok := req.(*kmsg.ProduceRequest); ok {
			for _, topic := range p.Topics {
				for _, part := range topic.Partitions {
					_, _ = DecodeBatches(part.Records, 1<<20)
				}
			}
		}
	})
}

func TestSeedRequestsDecode(t *testing.T) {
	for i, s := range seedRequests() {
		h, req, err := decodeRequest(s)
		if err != nil || req == nil {
			t.Fatalf("seed %d (key %d v%d): %v", i, h.key, h.version, err)
		}
	}
	// a version outside the window: no request, no error (the caller closes)
	if _, req, err := decodeRequest(frameOf(kmsg.NewPtrFetchRequest(), 13)); req != nil || err != nil {
		t.Fatalf("fetch v13: %v %v", req, err)
	}
	if _, _, err := decodeRequest([]byte{0, 1}); err == nil {
		t.Fatal("a two-byte frame decoded")
	}
}
