package kafka

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// FuzzDecodeBatches feeds arbitrary bytes to DecodeBatches. It must never
// panic, and whatever it accepts must be self-consistent: each batch holds
// the record count its header states, and re-encoding the records with
// AppendBatch decodes back to the same records.
func FuzzDecodeBatches(f *testing.F) {
	small := []Record{
		{Key: nil, Value: []byte{0, 1, 0xff}, Timestamp: 5, Headers: []Header{{Key: "h", Value: nil}, {Key: "", Value: []byte{}}}},
		{Key: []byte{}, Value: nil, Timestamp: 3},
	}
	for _, c := range testCodecs {
		f.Add(buildBatch(f, c, 1, small))
	}
	two := append(buildBatch(f, testCodecs[1], 1, small), buildBatch(f, testCodecs[5], 2, small[:1])...)
	f.Add(two)
	f.Add(AppendBatch(nil, []FetchedRecord{{Offset: 0, Record: small[0]}, {Offset: 1, Record: small[1]}}))

	const maxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := DecodeBatches(in, maxBytes)
		if err != nil {
			return
		}
		rest := in
		for i, b := range got {
			// DecodeBatches accepted it, so the header is whole.
			length := int(int32(binary.BigEndian.Uint32(rest[8:12])))
			count := int(int32(binary.BigEndian.Uint32(rest[57:61])))
			rest = rest[12+length:]
			if len(b.Records) != count {
				t.Fatalf("batch %d: %d records, header says %d", i, len(b.Records), count)
			}
			var fetched []FetchedRecord
			for j, r := range b.Records {
				fetched = append(fetched, FetchedRecord{Offset: int64(j), Record: r})
			}
			again, err := DecodeBatches(AppendBatch(nil, fetched), maxBytes)
			if err != nil {
				t.Fatalf("batch %d: re-encoded batch does not decode: %v", i, err)
			}
			if !reflect.DeepEqual(again[0].Records, b.Records) {
				t.Fatalf("batch %d: records changed through AppendBatch", i)
			}
		}
		if len(rest) != 0 {
			t.Fatalf("%d input bytes not covered by the batches", len(rest))
		}
	})
}
