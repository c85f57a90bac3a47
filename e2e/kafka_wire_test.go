package e2e

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/kafka"
)

// frame writes a request frame by hand: size, key, version, correlation
// id, client id, then body as given.
func (rc *rawConn) frame(size int32, key, version int16, body []byte) {
	rc.t.Helper()
	rc.corr++
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(rc.corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "raw"...)
	b = append(b, body...)
	if size < 0 {
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	}
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

func endOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	must(t, err)
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %+v", topic, o)
	}
	return o.Offset
}

// Bad input on the wire: a frame over the size limit, an API version the
// listener does not serve and a body that does not parse close the
// connection (the node logs which); an ApiVersions it does not know is
// answered in its v0 form with UNSUPPORTED_VERSION; a record batch whose
// CRC does not match is CORRUPT_MESSAGE and writes nothing. The node
// serves on after all of it.
func TestKafkaWireUnhappyPaths(t *testing.T) {
	n, addr := startKafkaNode(t)
	cl := kafkaClient(t, []string{addr})
	createTopic(t, cl, "wire", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "wire", Value: []byte("first")}).FirstErr())
	before := endOffset(t, cl, "wire")

	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)

	big := dialRaw(t, addr)
	big.frame(64<<20, kmsg.Metadata.Int16(), 9, nil)
	big.closed("a 64 MiB frame", md)

	unknown := dialRaw(t, addr)
	unknown.frame(-1, kmsg.Produce.Int16(), 99, []byte{0, 0, 0, 0})
	unknown.closed("Produce v99", md)

	malformed := dialRaw(t, addr)
	malformed.frame(-1, kmsg.Metadata.Int16(), 9, []byte{0xff})
	malformed.closed("a Metadata v9 body of one byte", md)

	av := dialRaw(t, addr)
	av.frame(-1, kmsg.ApiVersions.Int16(), 99, nil)
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.SetVersion(0)
	resp, err := av.recv(v0)
	must(t, err)
	if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != kerr.UnsupportedVersion.Code || len(r.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99: %+v, want UNSUPPORTED_VERSION and the keys served", r)
	}
	v3 := kmsg.NewPtrApiVersionsRequest()
	av.send(v3, 3) // the same connection, at a version served
	resp, err = av.recv(v3)
	must(t, err)
	if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3 after the retry: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// A batch with one byte of a record flipped after its CRC was taken.
	batch := kafka.AppendBatch(nil, []kafka.FetchedRecord{{Record: kafka.Record{Value: []byte("flipped"), Timestamp: time.Now().UnixMilli()}}})
	batch[len(batch)-3] ^= 0x01
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = batch
	top := kmsg.NewProduceRequestTopic()
	top.Topic, top.Partitions = "wire", []kmsg.ProduceRequestTopicPartition{part}
	pr.Topics = []kmsg.ProduceRequestTopic{top}
	crc := dialRaw(t, addr)
	crc.send(pr, 7)
	resp, err = crc.recv(pr)
	must(t, err)
	got := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	if got != kerr.CorruptMessage.Code {
		t.Fatalf("a batch failing its CRC: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(got))
	}

	if after := endOffset(t, cl, "wire"); after != before {
		t.Fatalf("end offset %d after the bad input, %d before: something was written", after, before)
	}
	must(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "wire", Value: []byte("second")}).FirstErr())
	if after := endOffset(t, cl, "wire"); after != before+1 {
		t.Fatalf("end offset %d after one more record, want %d", after, before+1)
	}
	n.requireRunning()
	logged, err := os.ReadFile(n.LogPath())
	must(t, err)
	for _, want := range []string{"over the size limit", "api=Produce key=0 version=99", "a malformed request"} {
		if !strings.Contains(string(logged), want) {
			t.Errorf("the node's log does not say %q", want)
		}
	}
}
