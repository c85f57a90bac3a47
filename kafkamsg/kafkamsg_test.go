package kafkamsg

import (
	"bytes"
	"testing"
)

func TestFramesRoundTripByteForByte(t *testing.T) {
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	cases := []Record{
		{Key: []byte("k"), Value: []byte(`{"a":1}`), Timestamp: 1700000000123},
		{Key: nil, Value: bin, Headers: []Header{{"h", []byte{0, 1}}, {"null", nil}, {"", []byte{}}}, Timestamp: -1},
		{Key: []byte{}, Value: nil},
		{Value: []byte{}},
	}
	for i, c := range cases {
		got, err := Parse(Append(nil, &c))
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !bytes.Equal(got.Key, c.Key) || (got.Key == nil) != (c.Key == nil) || !bytes.Equal(got.Value, c.Value) ||
			(got.Value == nil) != (c.Value == nil) || got.Timestamp != c.Timestamp || len(got.Headers) != len(c.Headers) {
			t.Fatalf("%d: %+v != %+v", i, got, c)
		}
		for j, h := range c.Headers {
			if got.Headers[j].Key != h.Key || !bytes.Equal(got.Headers[j].Value, h.Value) || (got.Headers[j].Value == nil) != (h.Value == nil) {
				t.Fatalf("%d: header %d %+v != %+v", i, j, got.Headers[j], h)
			}
		}
	}
}

func TestJSONView(t *testing.T) {
	for _, c := range []struct {
		v    []byte
		want string
	}{
		{[]byte(`{"a":1}`), `{"a":1}`},
		{[]byte(`"s"`), `"s"`},
		{nil, `null`},
		{[]byte{}, `{"$base64":""}`},
		{[]byte{0xff, 0}, `{"$base64":"/wA="}`},
		{[]byte(`{"a":`), `{"$base64":"eyJhIjo="}`},
	} {
		got, err := JSONView(Append(nil, &Record{Value: c.v}))
		if err != nil || string(got) != c.want {
			t.Fatalf("%q: %s %v, want %s", c.v, got, err, c.want)
		}
	}
	if got, _ := JSONView([]byte(`{"plain":true}`)); string(got) != `{"plain":true}` {
		t.Fatalf("a Queen payload changed: %s", got)
	}
}

func TestMalformedFramesAreRefused(t *testing.T) {
	good := Append(nil, &Record{Key: []byte("key"), Value: []byte("v"), Headers: []Header{{"h", []byte("x")}}})
	for i := 0; i < len(good)-1; i++ {
		if i == 2 { // the value is the rest: cutting it is still a frame
			continue
		}
		if _, err := Parse(good[:min(i, 6)]); err == nil && i < 6 {
			t.Fatalf("a frame cut to %d bytes parsed", i)
		}
	}
	if _, err := Parse([]byte{Marker, 9, 0, 0, 0}); err == nil {
		t.Fatal("an unknown version parsed")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Append(nil, &Record{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"a", nil}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Parse(Append(nil, r))
		if err != nil || !bytes.Equal(again.Value, r.Value) || !bytes.Equal(again.Key, r.Key) || len(again.Headers) != len(r.Headers) {
			t.Fatalf("re-encoded frame differs: %v", err)
		}
	})
}
