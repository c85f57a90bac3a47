package msgstore

import (
	"errors"
	"os"
)

// SegmentRef names one segment of the store as it was listed.
type SegmentRef struct {
	PID  []byte
	Base uint64
}

// Segments lists every segment of every partition on disk, for a scrub.
func (s *Store) Segments() []SegmentRef {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	var out []SegmentRef
	for _, e := range ents {
		pid, ok := PartitionID(e.Name())
		if !e.IsDir() || !ok {
			continue
		}
		s.mu.Lock()
		for _, g := range s.part(pid).segs {
			out = append(out, SegmentRef{PID: pid, Base: g.base})
		}
		s.mu.Unlock()
	}
	return out
}

// A scrub reads up to scrubPiece entries at once, and their records in one
// read when they span up to scrubSpan bytes.
const (
	scrubPiece = 1024
	scrubSpan  = 4 << 20
)

// ScrubSegment reads one segment's flushed entries and records in pieces
// and checks every one against its checksum, calling pace with the bytes
// of each read before it (a rate limit; an error from it ends the scrub of
// the segment). A mismatch is read again the way a consumer's read would go
// (Entry, Message), which reports real damage to OnCorrupt and returns it;
// a segment trimmed, removed or rewritten meanwhile is not damage. It
// returns how many records it checked and the damaged ones it confirmed.
func (s *Store) ScrubSegment(ref SegmentRef, pace func(bytes int) error) (checked int64, damaged []uint64, err error) {
	s.mu.Lock()
	var idxPath, logPath string
	var count int64
	for _, g := range s.part(ref.PID).segs {
		if g.base == ref.Base {
			idxPath, logPath, count = g.idxPath, g.logPath, g.count
		}
	}
	s.mu.Unlock()
	for i := int64(0); i < count; {
		n := min(count-i, scrubPiece)
		if err := pace(int(n * entrySize)); err != nil {
			return checked, damaged, err
		}
		buf := make([]byte, n*entrySize)
		got, err := s.readFileUpTo(idxPath, buf, i*entrySize)
		if err != nil || got < entrySize {
			return checked, damaged, nil // gone (retention, a deleted queue)
		}
		ents := make([]Entry, 0, got/entrySize)
		intact := make([]bool, 0, got/entrySize)
		var suspect []uint64
		for k := 0; k+entrySize <= got; k += entrySize {
			e, ok := readEntry(buf[k:])
			if !ok {
				suspect = append(suspect, ref.Base+uint64(i)+uint64(k/entrySize))
			}
			ents, intact = append(ents, e), append(intact, ok)
		}
		suspect = append(suspect, s.scrubRecords(ref.Base+uint64(i), ents, intact, logPath, pace)...)
		for _, seq := range suspect {
			if _, err := s.Message(ref.PID, seq); errors.Is(err, ErrCorrupt) {
				damaged = append(damaged, seq)
			}
		}
		checked += int64(len(ents))
		i += int64(len(ents))
	}
	return checked, damaged, nil
}

// scrubRecords reads in one piece the records of the intact entries among
// ents (seqs from first on) and returns the seqs whose record does not
// match its entry.
func (s *Store) scrubRecords(first uint64, ents []Entry, intact []bool, logPath string, pace func(int) error) []uint64 {
	lo, hi := int64(-1), int64(0)
	for i, e := range ents {
		if !intact[i] {
			continue
		}
		if lo < 0 || int64(e.Offset) < lo {
			lo = int64(e.Offset)
		}
		hi = max(hi, int64(e.Offset)+int64(e.Length))
	}
	if lo < 0 {
		return nil
	}
	if len(ents) > 1 && hi-lo > scrubSpan { // large records: one read each
		var bad []uint64
		for i := range ents {
			if intact[i] {
				bad = append(bad, s.scrubRecords(first+uint64(i), ents[i:i+1], intact[i:i+1], logPath, pace)...)
			}
		}
		return bad
	}
	if pace(int(hi-lo)) != nil {
		return nil
	}
	span := make([]byte, hi-lo)
	got, err := s.readFileUpTo(logPath, span, lo)
	if err != nil {
		return nil
	}
	var bad []uint64
	for i, e := range ents {
		if !intact[i] {
			continue
		}
		from, to := int64(e.Offset)-lo, int64(e.Offset)+int64(e.Length)-lo
		if to > int64(got) || checksum(span[from:to]) != e.CRC {
			bad = append(bad, first+uint64(i))
		}
	}
	return bad
}
