package kafka

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The batches under test are built with kmsg's encoders and the codecs'
// own compressors (stdlib gzip, not klauspost's), and CRCs with hash/crc32,
// so none of batches.go's encoding is used to check its decoding.

// testCodec compresses a records section the way a producer would.
type testCodec struct {
	name     string
	attr     int16
	compress func(t testing.TB, raw []byte) []byte
}

var testCodecs = []testCodec{
	{"none", 0, func(_ testing.TB, raw []byte) []byte { return raw }},
	{"gzip", 1, func(t testing.TB, raw []byte) []byte {
		var buf bytes.Buffer
		w := stdgzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
	{"snappy", 2, func(_ testing.TB, raw []byte) []byte { return snappy.Encode(nil, raw) }},
	// xerial.Encode splits into 32 KiB blocks, as snappy-java does.
	{"snappy-xerial", 2, func(_ testing.TB, raw []byte) []byte { return xerial.Encode(nil, raw) }},
	{"lz4", 3, func(t testing.TB, raw []byte) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(true)); err != nil {
			t.Fatal(err)
		}
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
	// EncodeAll states the content size in the frame header.
	{"zstd", 4, func(t testing.TB, raw []byte) []byte {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(raw, nil)
	}},
	// A streaming writer does not, like zstd-jni and librdkafka.
	{"zstd-stream", 4, func(t testing.TB, raw []byte) []byte {
		var buf bytes.Buffer
		enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		enc.Write(raw)
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}},
}

// kmsgRecords encodes recs as a records section with kmsg.Record, offset
// deltas 0..n-1 and timestamps relative to firstTS.
func kmsgRecords(recs []Record, firstTS int64) []byte {
	var out []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.Timestamp - firstTS, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// kmsg writes Length as given; with Length 0 (one byte) the rest
		// of the encoding is the body whose length it must hold.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

// testBatch is the header of a batch to build; records go in raw.
type testBatch struct {
	attr       int16
	producerID int64
	epoch      int16
	seq        int32
	firstTS    int64
	count      int32 // NumRecords; LastOffsetDelta is count-1
	records    []byte
}

// build encodes the batch with kmsg.RecordBatch and a correct CRC.
func (tb testBatch) build() []byte {
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(49 + len(tb.records)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           tb.attr,
		LastOffsetDelta:      tb.count - 1,
		FirstTimestamp:       tb.firstTS,
		MaxTimestamp:         tb.firstTS,
		ProducerID:           tb.producerID,
		ProducerEpoch:        tb.epoch,
		FirstSequence:        tb.seq,
		NumRecords:           tb.count,
		Records:              tb.records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// buildBatch builds a valid batch of recs compressed with c.
func buildBatch(t testing.TB, c testCodec, pid int64, recs []Record) []byte {
	t.Helper()
	return testBatch{
		attr: c.attr, producerID: pid, epoch: 3, seq: 42, firstTS: recs[0].Timestamp,
		count: int32(len(recs)), records: c.compress(t, kmsgRecords(recs, recs[0].Timestamp)),
	}.build()
}

// sampleRecords covers null/empty/binary keys, values and headers, positive
// and negative timestamp deltas, and one large compressible-but-not-trivial
// value so the compressors emit several blocks.
func sampleRecords() []Record {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte(rng.IntN(16))
	}
	const ts = 1_700_000_000_000
	return []Record{
		{Key: nil, Value: all, Timestamp: ts, Headers: []Header{
			{Key: "h1", Value: []byte("v1")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}, {Key: "bin", Value: all},
		}},
		{Key: []byte{}, Value: []byte{}, Timestamp: ts + 5},
		{Key: []byte("tomb"), Value: nil, Timestamp: ts - 3},
		{Key: all, Value: big, Timestamp: ts + 1<<40},
	}
}

func TestDecodeBatchesCodecs(t *testing.T) {
	want := sampleRecords()
	for _, c := range testCodecs {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeBatches(buildBatch(t, c, 7, want), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d batches", len(got))
			}
			b := got[0]
			if b.ProducerID != 7 || b.ProducerEpoch != 3 || b.BaseSequence != 42 || b.Transactional {
				t.Errorf("header = %+v", b)
			}
			if !reflect.DeepEqual(b.Records, want) {
				t.Errorf("records differ:\n got %.300v\nwant %.300v", b.Records, want)
			}
		})
	}
}

func TestDecodeBatchesConcatenatedAndTransactional(t *testing.T) {
	recs := sampleRecords()
	first := buildBatch(t, testCodecs[4], 1, recs[:2]) // lz4
	tb := testBatch{attr: 4 | 0x10, producerID: 2, epoch: 9, seq: 100, firstTS: recs[2].Timestamp, count: 2,
		records: testCodecs[5].compress(t, kmsgRecords(recs[2:], recs[2].Timestamp))} // zstd, transactional
	in := append(first, tb.build()...)
	got, err := DecodeBatches(in, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d batches", len(got))
	}
	if got[0].ProducerID != 1 || got[0].Transactional || !reflect.DeepEqual(got[0].Records, recs[:2]) {
		t.Errorf("first batch = %.200v", got[0])
	}
	if got[1].ProducerID != 2 || got[1].ProducerEpoch != 9 || got[1].BaseSequence != 100 || !got[1].Transactional ||
		!reflect.DeepEqual(got[1].Records, recs[2:]) {
		t.Errorf("second batch = %.200v", got[1])
	}
}

func TestDecodeBatchesDoesNotAliasInput(t *testing.T) {
	in := buildBatch(t, testCodecs[0], 1, []Record{{Key: []byte("k"), Value: []byte("value")}})
	got, err := DecodeBatches(in, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	clear(in)
	if r := got[0].Records[0]; string(r.Key) != "k" || string(r.Value) != "value" {
		t.Errorf("record changed with the input: %q %q", r.Key, r.Value)
	}
}

func wantErr(t *testing.T, in []byte, maxBytes int, target error) {
	t.Helper()
	_, err := DecodeBatches(in, maxBytes)
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func TestDecodeBatchesBitFlips(t *testing.T) {
	recs := []Record{{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h", Value: nil}}, Timestamp: 9}}
	for _, c := range testCodecs {
		in := buildBatch(t, c, 1, recs)
		// Every bit of the CRC and of the region it covers.
		for i := 17; i < len(in); i++ {
			for bit := range 8 {
				mut := bytes.Clone(in)
				mut[i] ^= 1 << bit
				if _, err := DecodeBatches(mut, 1<<20); !errors.Is(err, ErrCorruptBatch) {
					t.Fatalf("%s: flip byte %d bit %d: err = %v", c.name, i, bit, err)
				}
			}
		}
	}
}

func TestDecodeBatchesTruncated(t *testing.T) {
	in := buildBatch(t, testCodecs[1], 1, sampleRecords()[:3])
	for n := range len(in) {
		wantErr(t, in[:n], 1<<20, ErrCorruptBatch)
	}
	// A good batch followed by a truncated one.
	two := append(bytes.Clone(in), in[:len(in)-1]...)
	wantErr(t, two, 1<<20, ErrCorruptBatch)
	// A Length field larger than the data.
	long := bytes.Clone(in)
	binary.BigEndian.PutUint32(long[8:], uint32(len(in)))
	wantErr(t, long, 1<<20, ErrCorruptBatch)
}

func TestDecodeBatchesMagic(t *testing.T) {
	for _, magic := range []int8{0, 1} {
		m := kmsg.MessageV1{Magic: magic, Key: []byte("k"), Value: []byte("v"), MessageSize: 24}
		msg := m.AppendTo(nil)
		binary.BigEndian.PutUint32(msg[12:], crc32.ChecksumIEEE(msg[16:]))
		wantErr(t, msg, 1<<20, ErrUnsupportedMagic)
	}
	in := buildBatch(t, testCodecs[0], 1, sampleRecords()[:1])
	in[16] = 3
	wantErr(t, in, 1<<20, ErrUnsupportedMagic)
}

func TestDecodeBatchesUnsupportedCodec(t *testing.T) {
	for _, codec := range []int16{5, 6, 7} {
		tb := testBatch{attr: codec, count: 1, records: kmsgRecords(sampleRecords()[:1], 0)}
		wantErr(t, tb.build(), 1<<20, ErrUnsupportedCodec)
	}
}

func TestDecodeBatchesControlRefused(t *testing.T) {
	tb := testBatch{attr: 0x20 | 0x10, producerID: 1, count: 1, records: kmsgRecords([]Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}}, 0)}
	wantErr(t, tb.build(), 1<<20, ErrCorruptBatch)
}

// A value of zeros compresses by orders of magnitude with every codec: the
// decoder must stop at maxBytes, and the limit is exact.
func TestDecodeBatchesTooLarge(t *testing.T) {
	recs := []Record{{Value: make([]byte, 8<<20)}}
	raw := kmsgRecords(recs, 0)
	for _, c := range testCodecs {
		in := buildBatch(t, c, 1, recs)
		if c.attr != 0 && len(in) > 1<<20 {
			t.Fatalf("%s: bomb is %d bytes, not a bomb", c.name, len(in))
		}
		wantErr(t, in, 1<<20, ErrTooLarge)
		wantErr(t, in, len(raw)-1, ErrTooLarge)
		if _, err := DecodeBatches(in, len(raw)); err != nil {
			t.Errorf("%s: at exactly maxBytes: %v", c.name, err)
		}
	}
	// A zstd frame claiming a size past the limit is refused up front.
	enc, _ := zstd.NewWriter(nil)
	tb := testBatch{attr: 4, count: 1, records: enc.EncodeAll(raw, nil)}
	wantErr(t, tb.build(), 100, ErrTooLarge)
}

// rawRecord builds a records section by hand for malformed cases.
func rawRecord(fields ...int64) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.AppendVarint(b, f)
	}
	return append(binary.AppendVarint(nil, int64(len(b)+1)), append([]byte{0}, b...)...)
}

func TestDecodeBatchesBadRecords(t *testing.T) {
	good := kmsgRecords(sampleRecords()[:2], 0)
	cases := map[string]testBatch{
		"count larger than records":  {count: 3, records: good},
		"count smaller than records": {count: 1, records: good},
		"count zero":                 {count: 0, records: nil},
		"huge count":                 {count: 1 << 30, records: good},
		"negative count":             {count: -5, records: good},
		"lastOffsetDelta mismatch":   {count: 2, records: good, attr: 0}, // patched below
		// ts delta, offset delta, key len, value len, header count
		"key length -2":              {count: 1, records: rawRecord(0, 0, -2, 0, 0)},
		"value past record":          {count: 1, records: rawRecord(0, 0, -1, 50, 0)},
		"negative header count":      {count: 1, records: rawRecord(0, 0, -1, -1, -1)},
		"huge header count":          {count: 1, records: rawRecord(0, 0, -1, -1, 1<<30)},
		"null header key":            {count: 1, records: rawRecord(0, 0, -1, -1, 1, -1, -1)},
		"trailing bytes in record":   {count: 1, records: rawRecord(0, 0, -1, -1, 0, 0)},
		"record length past section": {count: 1, records: append([]byte{40}, rawRecord(0, 0, -1, -1, 0)[1:]...)},
		"bad varint":                 {count: 1, records: append(rawRecord(0, 0, -1, -1, 0)[:2], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
		"key length overflows int32": {count: 1, records: rawRecord(0, 0, 1<<33, -1, 0)},
	}
	for name, tb := range cases {
		in := tb.build()
		if name == "lastOffsetDelta mismatch" {
			binary.BigEndian.PutUint32(in[23:], 5)
			binary.BigEndian.PutUint32(in[17:], crc32.Checksum(in[21:], crc32.MakeTable(crc32.Castagnoli)))
		}
		if _, err := DecodeBatches(in, 1<<20); !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// The hand builder itself makes a valid record when the fields are.
	if _, err := DecodeBatches(testBatch{count: 1, records: rawRecord(0, 0, -1, -1, 1, 0, -1)}.build(), 100); err != nil {
		t.Errorf("valid hand-built record: %v", err)
	}
	wantErr(t, nil, 100, ErrCorruptBatch)
}

func TestAppendBatchDecodes(t *testing.T) {
	src := sampleRecords()
	var recs []FetchedRecord
	for i, r := range src {
		recs = append(recs, FetchedRecord{Offset: 1000 + int64(i), Record: r})
	}
	prefix := []byte("prefix")
	out := AppendBatch(bytes.Clone(prefix), recs)
	if !bytes.HasPrefix(out, prefix) {
		t.Fatal("prefix lost")
	}
	got, err := DecodeBatches(out[len(prefix):], 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b := got[0]; b.ProducerID != -1 || b.ProducerEpoch != -1 || b.BaseSequence != -1 || !reflect.DeepEqual(b.Records, src) {
		t.Errorf("decoded %.300v", b)
	}
	if got := AppendBatch(prefix, nil); !bytes.Equal(got, prefix) || &got[0] != &prefix[0] {
		t.Error("AppendBatch with no records changed dst")
	}
}

// TestAppendBatchKmsg checks AppendBatch against kmsg's decoders and
// hash/crc32, with non-consecutive offsets (as after compaction).
func TestAppendBatchKmsg(t *testing.T) {
	src := sampleRecords()
	offsets := []int64{50, 51, 60, 75}
	var recs []FetchedRecord
	for i, r := range src {
		recs = append(recs, FetchedRecord{Offset: offsets[i], Record: r})
	}
	out := AppendBatch(nil, recs)

	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(out); err != nil {
		t.Fatal(err)
	}
	if int(rb.Length) != len(out)-12 {
		t.Errorf("Length = %d for %d bytes", rb.Length, len(out))
	}
	if crc := crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != crc {
		t.Errorf("CRC = %08x, want %08x", uint32(rb.CRC), crc)
	}
	wantHdr := kmsg.RecordBatch{
		FirstOffset: 50, Length: rb.Length, PartitionLeaderEpoch: -1, Magic: 2, CRC: rb.CRC, Attributes: 0,
		LastOffsetDelta: 25, FirstTimestamp: src[0].Timestamp, MaxTimestamp: src[3].Timestamp,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 4, Records: rb.Records,
	}
	if !reflect.DeepEqual(rb, wantHdr) {
		t.Errorf("header = %+v\nwant %+v", rb, wantHdr)
	}

	rest := rb.Records
	for i, want := range recs {
		n, w := binary.Varint(rest)
		if w <= 0 || int(n)+w > len(rest) {
			t.Fatalf("record %d: bad length", i)
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(rest[:w+int(n)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = rest[w+int(n):]
		got := FetchedRecord{Offset: rb.FirstOffset + int64(kr.OffsetDelta), Record: Record{
			Key: kr.Key, Value: kr.Value, Timestamp: rb.FirstTimestamp + kr.TimestampDelta64,
		}}
		for _, h := range kr.Headers {
			got.Headers = append(got.Headers, Header{Key: h.Key, Value: h.Value})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record %d = %.200v\nwant %.200v", i, got, want)
		}
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes after the records", len(rest))
	}
}

// zstd decoders allocate the window a frame states, so one stating a window
// past both maxBytes and 8 MiB is refused before any allocation.
func TestDecodeBatchesZstdWindow(t *testing.T) {
	raw := kmsgRecords([]Record{{Value: bytes.Repeat([]byte("abc"), 1<<20)}}, 0)
	for _, tc := range []struct {
		window int
		err    error
	}{{8 << 20, nil}, {64 << 20, ErrTooLarge}} {
		var buf bytes.Buffer
		enc, err := zstd.NewWriter(&buf, zstd.WithWindowSize(tc.window), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		enc.Write(raw)
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		var h zstd.Header
		if err := h.Decode(buf.Bytes()); err != nil || h.WindowSize != uint64(tc.window) {
			t.Fatalf("encoder stated window %d (%v), want %d", h.WindowSize, err, tc.window)
		}
		in := testBatch{attr: 4, count: 1, records: buf.Bytes()}.build()
		if _, err := DecodeBatches(in, 4<<20); !errors.Is(err, tc.err) {
			t.Errorf("window %d: err = %v, want %v", tc.window, err, tc.err)
		}
	}
}
