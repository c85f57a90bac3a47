package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one Kafka record as a client produced it / a consumer fetches it.
type Record struct {
	Key       []byte // nil = null key
	Value     []byte // nil = null value (tombstone)
	Headers   []Header
	Timestamp int64 // ms since epoch (batch FirstTimestamp + TimestampDelta)
}

// Header is one record header. Kafka allows a null value but not a null key.
type Header struct {
	Key   string
	Value []byte // nil = null
}

// ProducedBatch is one decoded record batch of a Produce request.
type ProducedBatch struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
	Records       []Record
}

// FetchedRecord is a record with its offset, for a fetch answer.
type FetchedRecord struct {
	Offset int64
	Record
}

var (
	// ErrCorruptBatch covers CRC mismatches, bad lengths, truncation,
	// garbage, bad varints and batches Kafka itself would refuse as invalid
	// records (control batches, empty batches, inconsistent counts).
	ErrCorruptBatch = errors.New("kafka: corrupt record batch")
	// ErrUnsupportedMagic is returned for anything but magic 2, in practice
	// the magic 0/1 message sets of pre-0.11 clients.
	ErrUnsupportedMagic = errors.New("kafka: unsupported record batch magic")
	// ErrTooLarge is returned when a batch's (decompressed) records exceed
	// the caller's maxBytes.
	ErrTooLarge = errors.New("kafka: record batch too large")
	// ErrUnsupportedCodec is returned for a compression codec number other
	// than 0-4.
	ErrUnsupportedCodec = errors.New("kafka: unsupported compression codec")
)

// Layout of a magic-2 batch header (all big endian):
//
//	0  FirstOffset int64        21 Attributes int16
//	8  Length int32             23 LastOffsetDelta int32
//	12 PartitionLeaderEpoch     27 FirstTimestamp int64
//	16 Magic int8               35 MaxTimestamp int64
//	17 CRC uint32               43 ProducerID int64
//	                            51 ProducerEpoch int16
//	                            53 BaseSequence int32
//	                            57 NumRecords int32
//	                            61 records...
//
// Length counts everything after itself; CRC covers Attributes to the end.
const (
	batchLengthEnd  = 12 // FirstOffset + Length
	batchMagicAt    = 16 // same position in magic 0/1 message sets
	batchCRCAt      = 17
	batchCRCFrom    = 21
	batchHeaderSize = 61
	// batchMinLength is the smallest Length value: a header with no records.
	batchMinLength = batchHeaderSize - batchLengthEnd

	attrCodecMask     = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20

	// minRecordSize is the smallest possible encoded record: one byte each
	// for length, attributes, timestamp delta, offset delta, key length,
	// value length and header count. It bounds how many records a number
	// of bytes can hold, so a forged count cannot make us allocate.
	minRecordSize = 7
	// minHeaderSize is one byte each for key length and value length.
	minHeaderSize = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DecodeBatches decodes the `Records` bytes of one partition of a Produce
// request (v3+ always carries magic-2 record batches; there may be more than
// one batch concatenated). It checks each batch's CRC-32C, decompresses
// (gzip, snappy raw or xerial-framed, lz4 frame, zstd) and parses the
// records. Control batches, empty batches and batches whose LastOffsetDelta
// disagrees with their record count are refused, as Kafka's broker does.
//
// maxBytes bounds each batch's records section after decompression
// (ErrTooLarge beyond it); maxBytes <= 0 refuses every non-empty section.
// The returned records never alias b.
func DecodeBatches(b []byte, maxBytes int) ([]ProducedBatch, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no record batch", ErrCorruptBatch)
	}
	var out []ProducedBatch
	for len(b) > 0 {
		pb, n, err := decodeBatch(b, maxBytes)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", len(out), err)
		}
		out = append(out, pb)
		b = b[n:]
	}
	return out, nil
}

// decodeBatch decodes the batch at the start of b and returns how many bytes
// of b it took.
func decodeBatch(b []byte, maxBytes int) (ProducedBatch, int, error) {
	if len(b) <= batchMagicAt {
		return ProducedBatch{}, 0, fmt.Errorf("%w: truncated batch header (%d bytes)", ErrCorruptBatch, len(b))
	}
	// Check magic before the length: a magic 0/1 message set is smaller
	// than a batch header and deserves the clearer error.
	if magic := int8(b[batchMagicAt]); magic != 2 {
		return ProducedBatch{}, 0, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, magic)
	}
	length := int64(int32(binary.BigEndian.Uint32(b[8:12])))
	if length < batchMinLength {
		return ProducedBatch{}, 0, fmt.Errorf("%w: batch length %d", ErrCorruptBatch, length)
	}
	if length > int64(len(b)-batchLengthEnd) {
		return ProducedBatch{}, 0, fmt.Errorf("%w: batch length %d but only %d bytes", ErrCorruptBatch, length, len(b)-batchLengthEnd)
	}
	size := batchLengthEnd + int(length)
	raw := b[:size]

	wantCRC := binary.BigEndian.Uint32(raw[batchCRCAt:batchCRCFrom])
	if got := crc32.Checksum(raw[batchCRCFrom:], castagnoli); got != wantCRC {
		return ProducedBatch{}, 0, fmt.Errorf("%w: crc %08x, want %08x", ErrCorruptBatch, got, wantCRC)
	}

	// The fixed header is now known to be present and intact; let kmsg
	// name its fields. ReadFrom only fails on truncation, ruled out above.
	var hdr kmsg.RecordBatch
	if err := hdr.ReadFrom(raw); err != nil {
		return ProducedBatch{}, 0, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if hdr.Attributes&attrControl != 0 {
		// Control records (commit/abort markers) are written by the
		// coordinator, never produced by clients.
		return ProducedBatch{}, 0, fmt.Errorf("%w: control batch in produce", ErrCorruptBatch)
	}
	// Kafka's LogValidator refuses empty batches and ones whose offset range
	// disagrees with the count; the idempotence sequence math relies on it.
	if hdr.NumRecords <= 0 {
		return ProducedBatch{}, 0, fmt.Errorf("%w: record count %d", ErrCorruptBatch, hdr.NumRecords)
	}
	if int64(hdr.LastOffsetDelta)+1 != int64(hdr.NumRecords) {
		return ProducedBatch{}, 0, fmt.Errorf("%w: last offset delta %d for %d records", ErrCorruptBatch, hdr.LastOffsetDelta, hdr.NumRecords)
	}

	payload, err := batchRecordsBytes(int(hdr.Attributes&attrCodecMask), hdr.Records, maxBytes)
	if err != nil {
		return ProducedBatch{}, 0, err
	}
	recs, err := parseRecords(payload, int(hdr.NumRecords), hdr.FirstTimestamp)
	if err != nil {
		return ProducedBatch{}, 0, err
	}
	return ProducedBatch{
		ProducerID:    hdr.ProducerID,
		ProducerEpoch: hdr.ProducerEpoch,
		BaseSequence:  hdr.FirstSequence,
		Transactional: hdr.Attributes&attrTransactional != 0,
		Records:       recs,
	}, size, nil
}

// parseRecords parses exactly count records filling all of buf. Keys,
// values and header values are sub-slices of buf (capacity-capped, so an
// append to one cannot overwrite its neighbour).
func parseRecords(buf []byte, count int, firstTimestamp int64) ([]Record, error) {
	if count > len(buf)/minRecordSize {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorruptBatch, count, len(buf))
	}
	recs := make([]Record, 0, count)
	r := recReader{b: buf}
	for i := 0; i < count; i++ {
		body := recReader{b: r.bytes("record")}
		if r.err != nil {
			return nil, r.errAt(i)
		}
		_ = body.int8() // record attributes: unused by Kafka
		tsDelta := body.varlong("timestamp delta")
		_ = body.varint("offset delta") // offsets are assigned by the log
		rec := Record{
			Key:       body.bytes("key"),
			Value:     body.bytes("value"),
			Timestamp: firstTimestamp + tsDelta,
		}
		nh := body.varint("header count")
		if body.err == nil && (nh < 0 || int(nh) > len(body.b)/minHeaderSize) {
			body.fail(fmt.Sprintf("header count %d", nh))
		}
		if body.err == nil && nh > 0 {
			rec.Headers = make([]Header, 0, nh)
			for j := int32(0); j < nh && body.err == nil; j++ {
				key := body.bytes("header key")
				if key == nil && body.err == nil {
					body.fail("null header key")
				}
				rec.Headers = append(rec.Headers, Header{Key: string(key), Value: body.bytes("header value")})
			}
		}
		if body.err == nil && len(body.b) != 0 {
			body.fail(fmt.Sprintf("%d bytes left over", len(body.b)))
		}
		if body.err != nil {
			return nil, body.errAt(i)
		}
		recs = append(recs, rec)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", ErrCorruptBatch, len(r.b))
	}
	return recs, nil
}

// recReader reads Kafka's varint-encoded record fields. After the first
// failure every read returns a zero value, so a whole record can be read
// before checking err once.
type recReader struct {
	b   []byte
	err error
}

func (r *recReader) fail(detail string) {
	if r.err == nil {
		r.err = errors.New(detail)
	}
	r.b = nil
}

func (r *recReader) errAt(i int) error {
	return fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, r.err)
}

func (r *recReader) int8() int8 {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("truncated attributes")
		return 0
	}
	v := int8(r.b[0])
	r.b = r.b[1:]
	return v
}

// varlong reads a zigzag varint, the same encoding as encoding/binary.
func (r *recReader) varlong(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint for " + what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) varint(what string) int32 {
	v := r.varlong(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(what + " overflows int32")
		return 0
	}
	return int32(v)
}

// bytes reads a varint length then that many bytes; length -1 is null.
func (r *recReader) bytes(what string) []byte {
	n := r.varint(what + " length")
	if r.err != nil || n == -1 {
		return nil
	}
	if n < -1 || int(n) > len(r.b) {
		r.fail(fmt.Sprintf("%s length %d with %d bytes left", what, n, len(r.b)))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// AppendBatch appends one uncompressed magic-2 record batch holding recs
// (offsets consecutive or not: offset deltas are recs[i].Offset-recs[0].Offset;
// LastOffsetDelta = last-first), producer id -1, epoch -1, base sequence -1,
// partition leader epoch -1, attributes 0 (timestamp type CreateTime),
// FirstTimestamp = recs[0].Timestamp, MaxTimestamp = max of them, with a
// correct CRC-32C, to dst, and returns it. len(recs) == 0 returns dst
// unchanged. Offsets must be ascending and span less than 2^31.
func AppendBatch(dst []byte, recs []FetchedRecord) []byte {
	if len(recs) == 0 {
		return dst
	}
	first := recs[0]
	maxTS := first.Timestamp
	for _, r := range recs[1:] {
		maxTS = max(maxTS, r.Timestamp)
	}
	start := len(dst)
	hdr := kmsg.RecordBatch{
		FirstOffset:          first.Offset,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(recs[len(recs)-1].Offset - first.Offset),
		FirstTimestamp:       first.Timestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
	}
	// kmsg writes Length and CRC as given; both are patched in below once
	// the records are appended.
	dst = hdr.AppendTo(dst)
	var body []byte // one record's body, reused: its length prefixes it
	for _, r := range recs {
		body = body[:0]
		body = append(body, 0) // record attributes
		body = binary.AppendVarint(body, r.Timestamp-first.Timestamp)
		body = binary.AppendVarint(body, r.Offset-first.Offset)
		body = appendVarBytes(body, r.Key)
		body = appendVarBytes(body, r.Value)
		body = binary.AppendVarint(body, int64(len(r.Headers)))
		for _, h := range r.Headers {
			body = binary.AppendVarint(body, int64(len(h.Key)))
			body = append(body, h.Key...)
			body = appendVarBytes(body, h.Value)
		}
		dst = binary.AppendVarint(dst, int64(len(body)))
		dst = append(dst, body...)
	}
	batch := dst[start:]
	binary.BigEndian.PutUint32(batch[8:12], uint32(len(batch)-batchLengthEnd))
	binary.BigEndian.PutUint32(batch[batchCRCAt:batchCRCFrom], crc32.Checksum(batch[batchCRCFrom:], castagnoli))
	return dst
}

// appendVarBytes appends Kafka's varint-length bytes, length -1 for nil.
func appendVarBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
