package msgstore

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The store's paths as the state machine drives them: append in batches
// (one Flush per Raft batch), read runs back (a pop's hydrate), look up
// index entries (dedup and ack checks), and reclaim whole segments.
// go test -bench . -benchmem ./msgstore

var benchPayload = []byte(`{"d":"` + strings.Repeat("x", 248) + `"}`) // 256 bytes, as scripts/bench pushes

func benchMsg(seq uint64) *Message {
	id := make([]byte, 16)
	binary.BigEndian.PutUint64(id[8:], seq)
	return &Message{ID: id, TxnID: fmt.Sprintf("txn-%d", seq), CreatedUs: int64(seq), Payload: benchPayload}
}

// filled is a store of 4 MiB segments holding seqs 1..n of pidA, appended
// in batches of 100.
func filled(b *testing.B, n uint64) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{SegmentBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	pid := pidA
	for seq := uint64(1); seq <= n; {
		batch := s.Begin()
		for i := 0; i < 100 && seq <= n; i, seq = i+1, seq+1 {
			if err := batch.Append(pid, 1, seq, benchMsg(seq)); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Flush(); err != nil {
			b.Fatal(err)
		}
		batch.Done()
	}
	return s
}

// BenchmarkAppend: one batch of 100 messages to one partition, flushed.
func BenchmarkAppend(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	msgs := make([]*Message, 100)
	for i := range msgs {
		msgs[i] = benchMsg(uint64(i))
	}
	b.SetBytes(int64(len(msgs) * len(benchPayload)))
	b.ReportAllocs()
	seq := uint64(1)
	for b.Loop() {
		batch := s.Begin()
		for _, m := range msgs {
			if err := batch.Append(pidA, 1, seq, m); err != nil {
				b.Fatal(err)
			}
			seq++
		}
		if err := batch.Flush(); err != nil {
			b.Fatal(err)
		}
		batch.Done()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq-1), "ns/msg")
}

// BenchmarkReadRun: 100 consecutive messages from a random place in a
// partition of 100k (its files in the page cache).
func BenchmarkReadRun(b *testing.B) {
	const n = 100_000
	s := filled(b, n)
	r := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(100 * int64(len(benchPayload)))
	b.ReportAllocs()
	for b.Loop() {
		from := 1 + r.Uint64N(n-100)
		ms, err := s.Messages(pidA, from, from+99)
		if err != nil || len(ms) != 100 {
			b.Fatal(len(ms), err)
		}
	}
}

// BenchmarkEntry: one index entry by seq (what an ack or a dedup check
// reads).
func BenchmarkEntry(b *testing.B) {
	const n = 100_000
	s := filled(b, n)
	r := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Entry(pidA, 1+r.Uint64N(n)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReclaim: retention's path. Each op drops the front segment of
// a partition, a full 1 MiB one (about 3,600 messages): the cost is a pair
// of unlinks, whatever the number of messages in it. The next segment is
// written between ops, off the clock, so the disk holds two at most.
func BenchmarkReclaim(b *testing.B) {
	const segBytes = 1 << 20
	s, err := Open(b.TempDir(), Options{SegmentBytes: segBytes})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	seq := uint64(1)
	segments := func() []*segment {
		s.mu.Lock()
		defer s.mu.Unlock()
		return append([]*segment(nil), s.part(pidA).segs...)
	}
	// grow appends until the partition has n segments.
	grow := func(n int) {
		for len(segments()) < n {
			batch := s.Begin()
			for i := 0; i < 500; i, seq = i+1, seq+1 {
				if err := batch.Append(pidA, 1, seq, benchMsg(seq)); err != nil {
					b.Fatal(err)
				}
			}
			if err := batch.Flush(); err != nil {
				b.Fatal(err)
			}
			batch.Done()
		}
	}
	var reclaimed int64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		grow(2)
		segs := segments()
		sizeBefore := s.Size()
		b.StartTimer()
		batch := s.Begin()
		batch.DropBefore(pidA, segs[1].base)
		batch.Done()
		b.StopTimer()
		if s.Size() >= sizeBefore {
			b.Fatal("nothing reclaimed")
		}
		reclaimed += sizeBefore - s.Size()
		b.StartTimer()
	}
	b.ReportMetric(float64(reclaimed)/float64(b.N), "bytes-reclaimed/op")
}
