package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs, attributes bits 0-2 of a record batch.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// batchRecordsBytes returns the records section of a batch, decompressed,
// in a buffer of its own (never aliasing the request), refusing more than
// maxBytes of it with ErrTooLarge.
func batchRecordsBytes(codec int, data []byte, maxBytes int) ([]byte, error) {
	maxBytes = max(maxBytes, 0)
	// limit is the most we ever read: one byte past maxBytes tells "exactly
	// maxBytes" apart from "more".
	limit := int64(maxBytes) + 1
	if maxBytes == math.MaxInt {
		limit = math.MaxInt64
	}
	var (
		out []byte
		err error
	)
	switch codec {
	case codecNone:
		if len(data) > maxBytes {
			return nil, fmt.Errorf("%w: %d bytes of records, limit %d", ErrTooLarge, len(data), maxBytes)
		}
		// Copied so the records do not pin (or get clobbered with) the
		// caller's request buffer.
		return bytes.Clone(data), nil
	case codecGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(data)); err == nil {
			out, err = readLimited(zr, limit)
		}
	case codecSnappy:
		out, err = unsnappy(data, maxBytes)
	case codecLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(data)), limit)
	case codecZstd:
		out, err = unzstd(data, limit, maxBytes)
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCodec, codec)
	}
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: codec %d: %v", ErrCorruptBatch, codec, err)
	case len(out) > maxBytes:
		return nil, fmt.Errorf("%w: records decompress past the limit of %d bytes", ErrTooLarge, maxBytes)
	}
	if out == nil {
		out = []byte{} // keep "decoded, but empty" distinct from failure
	}
	return out, nil
}

// readLimited reads r to EOF but never more than limit bytes, so a
// decompression bomb costs at most limit bytes of memory. The caller
// compares the length with its maximum.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, limit))
}

// xerialMagic starts the framing Java's snappy-java (and so the Java client
// and librdkafka) wraps snappy data in: magic, then int32 version and int32
// minimum compatible version, then blocks of int32 length + raw snappy.
var xerialMagic = []byte("\x82SNAPPY\x00")

const xerialHeaderSize = 16

// unsnappy decodes raw snappy or xerial-framed snappy. Snappy blocks state
// their decoded length up front, so the size is checked before allocating.
func unsnappy(data []byte, maxBytes int) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(nil, data, maxBytes)
	}
	if len(data) < xerialHeaderSize {
		return nil, errors.New("truncated xerial header")
	}
	var out []byte
	for rest := data[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("truncated xerial block length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("xerial block of %d bytes with %d left", n, len(rest))
		}
		var err error
		if out, err = snappyBlock(out, rest[:n], maxBytes-len(out)); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst, refusing
// one that would add more than room bytes.
func snappyBlock(dst, block []byte, room int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > room {
		return nil, fmt.Errorf("%w: snappy block decodes to %d bytes, %d allowed", ErrTooLarge, n, room)
	}
	dst = append(dst, make([]byte, n)...)
	if _, err := snappy.Decode(dst[len(dst)-n:], block); err != nil {
		return nil, err
	}
	return dst, nil
}

// zstdMaxWindow is the largest zstd window accepted when maxBytes is
// smaller. It covers every level of zstd-jni (the Java client) up to 19
// streaming into an unknown size, and any single-shot encoder (franz-go,
// sarama, librdkafka state the size, so their window is at most the batch).
const zstdMaxWindow = 8 << 20

// zstdDecoders pools streaming decoders. A zstd.Decoder streams one input
// at a time, and streaming is what lets io.LimitReader stop a bomb at
// maxBytes (a shared decoder's DecodeAll can only bound output per decoder,
// not per call, and its cap-limit mode reports running out of room as a
// generic block error, so it cannot tell a bomb from garbage). With
// concurrency 1 a decoder runs synchronously: an idle one in the pool holds
// no goroutine and needs no Close.
var zstdDecoders sync.Pool

// unzstd decodes zstd frames, reading at most limit bytes.
func unzstd(data []byte, limit int64, maxBytes int) ([]byte, error) {
	var h zstd.Header
	if h.Decode(data) == nil && h.HasFCS && h.FrameContentSize > uint64(maxBytes) {
		return nil, fmt.Errorf("%w: zstd frame states %d bytes, limit %d", ErrTooLarge, h.FrameContentSize, maxBytes)
	}
	dec, _ := zstdDecoders.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecodeBuffersBelow(0), // always stream, never DecodeAll unbounded
		)
		if err != nil {
			return nil, err
		}
	}
	defer func() {
		_ = dec.Reset(nil) // drop the reference to data before pooling
		zstdDecoders.Put(dec)
	}()
	// The decoder allocates the frame's stated window up front, so bound
	// it: windows up to maxBytes cost no more than the output may, and
	// zstdMaxWindow keeps legitimate clients working under a small maxBytes.
	window := uint64(min(max(limit, zstdMaxWindow), 1<<40))
	if err := dec.ResetWithOptions(bytes.NewReader(data), zstd.WithDecoderMaxWindow(window)); err != nil {
		return nil, err
	}
	out, err := readLimited(dec, limit)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("%w: zstd window over %d bytes", ErrTooLarge, window)
	}
	return out, err
}
