package msgstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Batch is the writes of one Raft batch, in memory until Flush. Only the
// apply goroutine uses a Batch, one at a time.
type Batch struct {
	s       *Store
	touched map[*segment]bool
	removes []string // paths to remove after the state file committed (Done)
	drops   []drop   // segments to drop then (DropBefore)
	stage   *Stage
	damaged error // the first corrupt read of the batch
}

// Damaged is the first read of this batch that found damaged bytes
// (a *CorruptError), or nil. A state machine must not commit a batch whose
// commands read it: the other replicas read the bytes as written.
func (b *Batch) Damaged() error { return b.damaged }

// note remembers a corrupt read and returns err.
func (b *Batch) note(err error) error {
	if b.damaged == nil && errors.Is(err, ErrCorrupt) {
		b.damaged = err
	}
	return err
}

// Begin starts a batch.
func (s *Store) Begin() *Batch {
	return &Batch{s: s, touched: map[*segment]bool{}}
}

// Stage is one command's writes inside a batch: Keep adds them to the
// batch, Discard takes them back (a command refused as a whole).
type Stage struct {
	b     *Batch
	marks map[*segment]mark
	made  []madeSeg // segments this stage created
	rm    int       // len(b.removes) when the stage began
	dr    int       // len(b.drops) then
}

type mark struct{ log, idx int }

type madeSeg struct {
	p *partition
	g *segment
}

// Stage starts a command's writes. Stages do not nest.
func (b *Batch) Stage() *Stage {
	st := &Stage{b: b, marks: map[*segment]mark{}, rm: len(b.removes), dr: len(b.drops)}
	b.stage = st
	return st
}

// Keep makes the stage's writes part of the batch.
func (st *Stage) Keep() { st.b.stage = nil }

// Discard takes the stage's writes back.
func (st *Stage) Discard() {
	s := st.b.s
	for g, m := range st.marks {
		g.pendLog, g.pendIdx = g.pendLog[:m.log], g.pendIdx[:m.idx]
	}
	s.mu.Lock()
	for i := len(st.made) - 1; i >= 0; i-- {
		p := st.made[i].p
		if n := len(p.segs); n > 0 && p.segs[n-1] == st.made[i].g {
			p.segs = p.segs[:n-1]
		}
		delete(st.b.touched, st.made[i].g)
	}
	s.mu.Unlock()
	st.b.removes = st.b.removes[:st.rm]
	st.b.drops = st.b.drops[:st.dr]
	st.b.stage = nil
}

func (b *Batch) noteWrite(g *segment) {
	b.touched[g] = true
	if st := b.stage; st != nil {
		if _, ok := st.marks[g]; !ok {
			st.marks[g] = mark{len(g.pendLog), len(g.pendIdx)}
		}
	}
}

// Append stores m as seq of pid. seq must follow the partition's last
// record (the state machine's next seq): the first append to a partition in
// this process trims what a crash left past the committed state first (a
// partition is never appended to before firstSeq of it is known, so
// segments wholly below firstSeq are removed with it).
func (b *Batch) Append(pid []byte, firstSeq, seq uint64, m *Message) error {
	return b.AppendRolling(pid, firstSeq, seq, m, 0)
}

// AppendRolling is Append that also starts a new segment when the active
// one's first record is spanUs or more older than m (0: by size only). A
// partition whose messages retention removes after a time rolls by time, so
// that whole files fall behind the retention and go, however slowly the
// partition fills. The span must be the same on every replica: it comes
// from the queue's options, which the log sets.
func (b *Batch) AppendRolling(pid []byte, firstSeq, seq uint64, m *Message, spanUs int64) error {
	s := b.s
	s.mu.Lock()
	p := s.part(pid)
	s.mu.Unlock()
	if !p.trimmed {
		if err := b.trim(p, firstSeq, seq); err != nil {
			return err
		}
	}
	size := encodedSize(m)
	s.mu.Lock()
	var g *segment
	if n := len(p.segs); n > 0 {
		g = p.segs[n-1]
	}
	if g != nil && g.base+uint64(g.totalCount()) != seq {
		s.mu.Unlock()
		return fmt.Errorf("msgstore: append of seq %d to a partition whose last segment ends before %d", seq, g.base+uint64(g.totalCount()))
	}
	if g == nil || (g.totalCount() > 0 && (g.totalLog()+int64(size) > s.opts.SegmentBytes || s.tooOld(g, m.CreatedUs, spanUs))) {
		g = newSegment(p.dir, seq)
		g.firstUs, g.firstKnown = m.CreatedUs, true
		p.segs = append(p.segs, g)
		if st := b.stage; st != nil {
			st.made = append(st.made, madeSeg{p, g})
		}
	}
	s.mu.Unlock()
	b.noteWrite(g)
	e := Entry{Offset: uint32(g.totalLog()), Length: uint32(size), CreatedUs: m.CreatedUs, TxnHash: TxnHash(m.TxnID)}
	start := len(g.pendLog)
	g.pendLog = encode(g.pendLog, m)
	e.CRC = checksum(g.pendLog[start:])
	var eb [entrySize]byte
	e.put(eb[:])
	g.pendIdx = append(g.pendIdx, eb[:]...)
	return nil
}

// trim cuts p back to seqs firstSeq..next-1, which the state file
// committed: it removes segments wholly past them or wholly before them and
// truncates the last kept one after its last committed record.
func (b *Batch) trim(p *partition, firstSeq, next uint64) error {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var keep []*segment
	for i, g := range p.segs {
		end := next // first seq past g
		if i+1 < len(p.segs) {
			end = min(end, p.segs[i+1].base)
		}
		switch {
		case g.base >= next, end <= firstSeq:
			s.files.forget(g.logPath)
			s.files.forget(g.idxPath)
			if err := removeFiles(g.logPath, g.idxPath); err != nil {
				return err
			}
		default:
			keep = append(keep, g)
		}
	}
	p.segs = keep
	if n := len(keep); n > 0 {
		g := keep[n-1]
		count := int64(next - g.base)
		var logLen int64
		if count > 0 {
			e, err := s.fileEntry(g, next-1)
			if errors.Is(err, ErrNotFound) { // the index is shorter than what the state committed
				err = s.corrupt(&CorruptError{Path: g.idxPath, Seq: next - 1, What: "index entry", Why: "is cut off (the file ends before what the state committed)"})
			}
			if err != nil {
				return b.note(fmt.Errorf("msgstore: trim %s: last committed record %d: %w", p.dir, next-1, err))
			}
			logLen = int64(e.Offset) + int64(e.Length)
		}
		if g.count != count || g.logSize != logLen {
			s.files.forget(g.logPath)
			s.files.forget(g.idxPath)
			if err := os.Truncate(g.idxPath, count*entrySize); err != nil {
				return fmt.Errorf("msgstore: trim: %w", err)
			}
			if err := os.Truncate(g.logPath, logLen); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("msgstore: trim: %w", err)
			}
			g.count, g.logSize = count, logLen
		}
	}
	p.trimmed = true
	return nil
}

func removeFiles(paths ...string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("msgstore: %w", err)
		}
	}
	return nil
}

// Entry returns the index entry of (pid, seq), this batch's writes
// included.
func (b *Batch) Entry(pid []byte, seq uint64) (Entry, error) {
	g := b.segmentOf(pid, seq)
	if g == nil {
		return Entry{}, ErrNotFound
	}
	i := int64(seq - g.base)
	if i >= g.count {
		j := (i - g.count) * entrySize
		if j+entrySize > int64(len(g.pendIdx)) {
			return Entry{}, ErrNotFound
		}
		e, err := b.s.entryAt(g.pendIdx[j:], g.idxPath, seq)
		return e, b.note(err)
	}
	e, err := b.s.fileEntry(g, seq)
	return e, b.note(err)
}

// Message reads (pid, seq), this batch's writes included.
func (b *Batch) Message(pid []byte, seq uint64) (*Message, error) {
	e, err := b.Entry(pid, seq)
	if err != nil {
		return nil, err
	}
	rec, err := b.record(pid, seq)
	if err != nil {
		return nil, err
	}
	m := &Message{CreatedUs: e.CreatedUs}
	if err := decode(rec, m); err != nil {
		return nil, err
	}
	m.Payload = append([]byte(nil), m.Payload...)
	m.ID = append([]byte(nil), m.ID...)
	return m, nil
}

// Txn reads the transaction id of (pid, seq), this batch's writes included.
func (b *Batch) Txn(pid []byte, seq uint64) (string, error) {
	m, err := b.record(pid, seq)
	if err != nil {
		return "", err
	}
	return txnOf(m)
}

// record returns the bytes of (pid, seq)'s record (aliasing the batch's
// buffer when it is unflushed: do not keep it).
func (b *Batch) record(pid []byte, seq uint64) ([]byte, error) {
	g := b.segmentOf(pid, seq)
	if g == nil {
		return nil, ErrNotFound
	}
	e, err := b.Entry(pid, seq)
	if err != nil {
		return nil, err
	}
	if int64(e.Offset) >= g.logSize {
		off := int64(e.Offset) - g.logSize
		if off+int64(e.Length) > int64(len(g.pendLog)) {
			return nil, ErrNotFound
		}
		return g.pendLog[off : off+int64(e.Length)], nil
	}
	rec := make([]byte, e.Length)
	if err := b.s.readRecords(g.logPath, rec, int64(e.Offset), seq); err != nil {
		return nil, b.note(err)
	}
	if err := b.s.checkRecord(e, rec, g.logPath, seq); err != nil {
		return nil, b.note(err)
	}
	return rec, nil
}

func (b *Batch) segmentOf(pid []byte, seq uint64) *segment {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return b.s.part(pid).find(seq)
}

// RemovePartition removes a partition's files once the batch committed.
func (b *Batch) RemovePartition(pid []byte) {
	b.removes = append(b.removes, filepath.Join(b.s.dir, partKey(pid)))
}

type drop struct {
	pid    []byte
	before uint64
}

// DropBefore removes, once the batch committed, every segment of pid that
// holds only seqs below before: how retention reclaims space, a whole file
// pair at a time, never a record at a time. The segment being appended to
// goes too when every record in it is below before (the next append starts
// a new one at the partition's next seq). The caller's state no longer
// refers to the seqs dropped.
func (b *Batch) DropBefore(pid []byte, before uint64) {
	b.drops = append(b.drops, drop{pid: pid, before: before})
}

// Flush writes the batch to the files: one write per file it touched. The
// state machine calls it just before the state file commits the batch; an
// error there must stop the node (the state file would commit records the
// files do not hold).
func (b *Batch) Flush() error {
	s := b.s
	for g := range b.touched {
		if err := s.flushSegment(g); err != nil {
			return err
		}
	}
	b.touched = map[*segment]bool{}
	return nil
}

func (s *Store) flushSegment(g *segment) error {
	if len(g.pendIdx) == 0 && len(g.pendLog) == 0 {
		return nil
	}
	if !g.dirMade {
		if err := os.MkdirAll(filepath.Dir(g.logPath), 0o755); err != nil {
			return fmt.Errorf("msgstore: %w", err)
		}
		g.dirMade = true
	}
	for _, w := range []struct {
		path string
		at   int64
		b    *[]byte
	}{{g.logPath, g.logSize, &g.pendLog}, {g.idxPath, g.count * entrySize, &g.pendIdx}} {
		if len(*w.b) == 0 {
			continue
		}
		f, release, err := s.files.get(w.path, true)
		if err != nil {
			return fmt.Errorf("msgstore: %w", err)
		}
		_, err = f.WriteAt(*w.b, w.at)
		release()
		if err != nil {
			return fmt.Errorf("msgstore: write %s: %w", w.path, err)
		}
		s.dirty[w.path] = true
	}
	s.mu.Lock() // readers look at count
	g.logSize += int64(len(g.pendLog))
	g.count += int64(len(g.pendIdx) / entrySize)
	s.mu.Unlock()
	g.pendLog, g.pendIdx = g.pendLog[:0], g.pendIdx[:0]
	return nil
}

// Done runs what must wait until the state file committed the batch:
// removing the files of partitions it deleted (a crash before the commit
// must find them still there). While a snapshot pins the files, removals
// wait for its release.
func (b *Batch) Done() {
	if len(b.removes) == 0 && len(b.drops) == 0 {
		return
	}
	s := b.s
	s.mu.Lock()
	for _, dir := range b.removes {
		delete(s.parts, filepath.Base(dir))
	}
	for _, d := range b.drops {
		for _, g := range s.part(d.pid).dropBelow(d.before) {
			b.removes = append(b.removes, g.logPath, g.idxPath)
		}
	}
	if s.pins > 0 {
		s.later = append(s.later, b.removes...)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.removeAll(b.removes)
}

// dropBelow takes out of p's list, and returns, its leading segments that
// hold only seqs below before (the last one too when every record in it
// is). Callers hold s.mu and remove the files.
func (p *partition) dropBelow(before uint64) []*segment {
	i := 0
	for ; i < len(p.segs); i++ {
		if i+1 < len(p.segs) {
			if p.segs[i+1].base > before {
				break
			}
			continue
		}
		if n := uint64(p.segs[i].totalCount()); n == 0 || p.segs[i].base+n > before {
			break
		}
	}
	gone := p.segs[:i:i]
	p.segs = p.segs[i:]
	return gone
}

// tooOld reports whether g's first record is spanUs or more older than
// createdUs.
func (s *Store) tooOld(g *segment, createdUs, spanUs int64) bool {
	if spanUs <= 0 {
		return false
	}
	if !g.firstKnown {
		e, err := s.fileEntry(g, g.base)
		if err != nil {
			return false
		}
		g.firstUs, g.firstKnown = e.CreatedUs, true
	}
	return createdUs-g.firstUs >= spanUs
}

// removeAll removes partition directories and segment files.
func (s *Store) removeAll(paths []string) {
	for _, path := range paths {
		s.files.forget(path)
		ents, _ := os.ReadDir(path) // a partition's directory
		for _, e := range ents {
			s.files.forget(filepath.Join(path, e.Name()))
		}
		os.RemoveAll(path)
	}
}

// Sync makes every file written since the last Sync durable (before a
// snapshot lets Raft drop the log that holds the same records).
func (s *Store) Sync() error {
	dirs := map[string]bool{s.dir: true}
	for path := range s.dirty {
		f, release, err := s.files.get(path, false)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				delete(s.dirty, path)
				continue
			}
			return fmt.Errorf("msgstore: sync: %w", err)
		}
		err = f.Sync()
		release()
		if err != nil {
			return fmt.Errorf("msgstore: sync %s: %w", path, err)
		}
		dirs[filepath.Dir(path)] = true
		delete(s.dirty, path)
	}
	for d := range dirs {
		if f, err := os.Open(d); err == nil {
			f.Sync()
			f.Close()
		}
	}
	return nil
}

// EachEntry calls fn with the index entry of every seq from first to next-1
// in order (this batch's writes included), reading the files in large
// pieces, until fn returns false.
func (b *Batch) EachEntry(pid []byte, first, next uint64, fn func(seq uint64, e Entry) bool) error {
	return b.note(b.s.eachEntry(pid, first, next, true, fn, b.Entry))
}

// Head is what names a stored record: its index entry, its messageId and
// its transactionId. ID aliases the bytes read for the call that returned it.
type Head struct {
	Entry
	ID  []byte
	Txn string
}

func headOf(rec []byte, e Entry) (Head, error) {
	txn, err := txnOf(rec)
	if err != nil {
		return Head{}, err
	}
	return Head{Entry: e, ID: rec[:16:16], Txn: txn}, nil
}

// Heads reads the heads of seqs from..to (inclusive) of a partition, this
// batch's writes included, with one read of the index and one of the
// records per segment file the range spans.
func (b *Batch) Heads(pid []byte, from, to uint64) ([]Head, error) {
	var ents []Entry
	if err := b.EachEntry(pid, from, to+1, func(_ uint64, e Entry) bool { ents = append(ents, e); return true }); err != nil {
		return nil, err
	}
	out := make([]Head, 0, len(ents))
	for i := 0; i < len(ents); {
		seq := from + uint64(i)
		g := b.segmentOf(pid, seq)
		if g == nil {
			return nil, ErrNotFound
		}
		// The run of entries in g's flushed file part, read in one piece.
		j := i
		for j < len(ents) && from+uint64(j) < g.base+uint64(g.totalCount()) && int64(ents[j].Offset) < g.logSize {
			j++
		}
		if j == i { // unflushed: from the batch's buffer
			rec, err := b.record(pid, seq)
			if err != nil {
				return nil, err
			}
			h, err := headOf(append([]byte(nil), rec...), ents[i])
			if err != nil {
				return nil, err
			}
			out = append(out, h)
			i++
			continue
		}
		first, last := ents[i], ents[j-1]
		span := make([]byte, int64(last.Offset)+int64(last.Length)-int64(first.Offset))
		if err := b.s.readRecords(g.logPath, span, int64(first.Offset), seq); err != nil {
			return nil, b.note(err)
		}
		for k := i; k < j; k++ {
			off := ents[k].Offset - first.Offset
			rec := span[off : off+ents[k].Length]
			if err := b.s.checkRecord(ents[k], rec, g.logPath, from+uint64(k)); err != nil {
				return nil, b.note(err)
			}
			h, err := headOf(rec, ents[k])
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
		i = j
	}
	return out, nil
}
