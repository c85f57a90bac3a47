package kafkamsg

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Marker is a frame's first byte; Version its second.
const (
	Marker  = 0x01
	Version = 1
)

const (
	flagKey       = 1 << 0 // a key is present (not null)
	flagNullValue = 1 << 1
)

// Header is one record header.
type Header struct {
	Key   string
	Value []byte // nil = null
}

// Record is a Kafka record as stored.
type Record struct {
	Key       []byte // nil = null
	Value     []byte // nil = null
	Headers   []Header
	Timestamp int64 // ms since the epoch
}

// ErrCorrupt: bytes that begin like a frame but do not parse.
var ErrCorrupt = errors.New("kafkamsg: a malformed record frame")

// IsFrame reports whether a stored payload is a frame.
func IsFrame(b []byte) bool { return len(b) >= 2 && b[0] == Marker }

// Append appends r's frame to dst.
func Append(dst []byte, r *Record) []byte {
	var flags byte
	if r.Key != nil {
		flags |= flagKey
	}
	if r.Value == nil {
		flags |= flagNullValue
	}
	dst = append(dst, Marker, Version, flags)
	dst = binary.AppendVarint(dst, r.Timestamp)
	if r.Key != nil {
		dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
		dst = append(dst, r.Key...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendUvarint(dst, uint64(len(h.Key)))
		dst = append(dst, h.Key...)
		if h.Value == nil {
			dst = binary.AppendVarint(dst, -1)
			continue
		}
		dst = binary.AppendVarint(dst, int64(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return append(dst, r.Value...)
}

// Parse reads a frame; the record's byte slices alias b.
func Parse(b []byte) (*Record, error) {
	if len(b) < 3 || b[0] != Marker || b[1] != Version {
		return nil, ErrCorrupt
	}
	flags := b[2]
	b = b[3:]
	r := &Record{}
	ts, n := binary.Varint(b)
	if n <= 0 {
		return nil, ErrCorrupt
	}
	r.Timestamp, b = ts, b[n:]
	bytesOf := func() ([]byte, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, false
		}
		v := b[n : n+int(l) : n+int(l)]
		b = b[n+int(l):]
		return v, true
	}
	if flags&flagKey != 0 {
		k, ok := bytesOf()
		if !ok {
			return nil, ErrCorrupt
		}
		r.Key = k
	}
	nh, n := binary.Uvarint(b)
	if n <= 0 || nh > uint64(len(b)) {
		return nil, ErrCorrupt
	}
	b = b[n:]
	for range nh {
		k, ok := bytesOf()
		if !ok {
			return nil, ErrCorrupt
		}
		vl, n := binary.Varint(b)
		if n <= 0 || vl < -1 || vl > int64(len(b)-n) {
			return nil, ErrCorrupt
		}
		b = b[n:]
		h := Header{Key: string(k)}
		if vl >= 0 {
			h.Value, b = b[:vl:vl], b[vl:]
		}
		r.Headers = append(r.Headers, h)
	}
	if flags&flagNullValue == 0 {
		r.Value = b
		if r.Value == nil {
			r.Value = []byte{}
		}
	} else if len(b) != 0 {
		return nil, ErrCorrupt
	}
	return r, nil
}

// JSONView is the payload a Queen consumer sees of a stored payload: a
// payload that is not a frame as it is, a frame's value where it is JSON
// text, null for a null value, else the base64 wrapper.
func JSONView(b []byte) ([]byte, error) {
	if !IsFrame(b) {
		return b, nil
	}
	r, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return ValueJSON(r.Value), nil
}

// ValueJSON is a Kafka value as Queen JSON.
func ValueJSON(v []byte) []byte {
	switch {
	case v == nil:
		return []byte("null")
	case len(v) > 0 && json.Valid(v):
		return v
	}
	out := append([]byte(`{"$base64":"`), base64.StdEncoding.EncodeToString(v)...)
	return append(out, `"}`...)
}
