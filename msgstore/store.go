package msgstore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// SegmentBytes rolls a partition to a new segment once its active one
	// holds this many bytes of records; 0 = 64 MiB. It must be the same on
	// every replica (it decides which file a record is in).
	SegmentBytes int64
	// MaxOpenFiles bounds the open segment files; 0 = 512.
	MaxOpenFiles int
}

// Store is the message files of one state machine.
type Store struct {
	dir   string
	opts  Options
	files *fileCache

	mu    sync.Mutex // parts, each partition's segs; pins and deferred
	parts map[string]*partition
	pins  int
	later []string // paths to remove once no snapshot pins the files

	dirty map[string]bool // files written since the last Sync (apply goroutine only)

	migrated  int // legacy index files Open rewrote
	onCorrupt atomic.Pointer[func(error)]
}

// partition is one partition's segments, sorted by first seq.
type partition struct {
	dir     string
	segs    []*segment
	loaded  bool // segs listed from the directory
	trimmed bool // cut back to the committed state: appends go at the end
}

// segment is one .log/.idx pair. logSize and count are what the files
// hold; pending writes of the current batch are in pendLog and pendIdx.
type segment struct {
	base    uint64
	logPath string
	idxPath string
	logSize int64
	count   int64
	pendLog []byte
	pendIdx []byte
	dirMade bool // its directory exists
	// firstUs is the createdAt of the segment's first record, once known
	// (time-based rolling).
	firstUs    int64
	firstKnown bool
}

func (g *segment) totalLog() int64   { return g.logSize + int64(len(g.pendLog)) }
func (g *segment) totalCount() int64 { return g.count + int64(len(g.pendIdx)/entrySize) }

// Open opens (creating) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 64 << 20
	}
	if opts.MaxOpenFiles <= 0 {
		opts.MaxOpenFiles = 512
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("msgstore: %w", err)
	}
	migrated, err := migrateLegacy(dir)
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, opts: opts, files: newFileCache(opts.MaxOpenFiles), migrated: migrated,
		parts: map[string]*partition{}, dirty: map[string]bool{}}, nil
}

// Migrated is how many index files of state format 3 Open rewrote with
// checksums.
func (s *Store) Migrated() int { return s.migrated }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the open files.
func (s *Store) Close() error {
	s.files.closeAll()
	return nil
}

func partKey(pid []byte) string { return hex.EncodeToString(pid) }

// part returns the partition, listing its segments on first use. Callers
// hold s.mu.
func (s *Store) part(pid []byte) *partition {
	k := partKey(pid)
	p, ok := s.parts[k]
	if !ok {
		p = &partition{dir: filepath.Join(s.dir, k)}
		s.parts[k] = p
	}
	if !p.loaded {
		p.loaded = true
		p.segs = listSegments(p.dir)
	}
	return p
}

// listSegments reads a partition directory: every .index file with its .log.
func listSegments(dir string) []*segment {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var segs []*segment
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, indexExt) {
			continue
		}
		base, err := strconv.ParseUint(strings.TrimSuffix(name, indexExt), 10, 64)
		if err != nil {
			continue
		}
		g := newSegment(dir, base)
		if st, err := os.Stat(g.idxPath); err == nil {
			g.count = st.Size() / entrySize
		}
		if st, err := os.Stat(g.logPath); err == nil {
			g.logSize = st.Size()
		}
		segs = append(segs, g)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	return segs
}

func newSegment(dir string, base uint64) *segment {
	name := fmt.Sprintf("%020d", base)
	return &segment{base: base, logPath: filepath.Join(dir, name+".log"), idxPath: filepath.Join(dir, name+indexExt)}
}

// indexExt names a segment's index file (legacyIndexExt: state format 3's,
// without checksums, migrated at open).
const (
	indexExt       = ".index"
	legacyIndexExt = ".idx"
)

// find returns the segment that holds seq (the last one starting at or
// before it), or nil.
func (p *partition) find(seq uint64) *segment {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > seq })
	if i == 0 {
		return nil
	}
	return p.segs[i-1]
}

// ErrNotFound: the store holds no such message (never written, removed by
// retention, or its queue was deleted).
var ErrNotFound = errors.New("msgstore: message not found")

// Reads. They see what was flushed: a reader that works from a committed
// view of the state asks only for seqs committed in that view, which were
// flushed before the view's commit. (The apply goroutine reads its own
// unflushed writes through Batch.)

// Entry returns the index entry of (pid, seq).
func (s *Store) Entry(pid []byte, seq uint64) (Entry, error) {
	s.mu.Lock()
	g := s.part(pid).find(seq)
	s.mu.Unlock()
	if g == nil {
		return Entry{}, ErrNotFound
	}
	return s.fileEntry(g, seq)
}

func (s *Store) fileEntry(g *segment, seq uint64) (Entry, error) {
	var b [entrySize]byte
	if err := s.readFile(g.idxPath, b[:], int64(seq-g.base)*entrySize); err != nil {
		return Entry{}, err
	}
	return s.entryAt(b[:], g.idxPath, seq)
}

// Entries returns the index entries of seqs from..to (inclusive) that one
// segment holds, starting at from: fewer than asked when the segment ends
// first (ask again from the next seq).
func (s *Store) Entries(pid []byte, from, to uint64) ([]Entry, error) {
	s.mu.Lock()
	g := s.part(pid).find(from)
	s.mu.Unlock()
	if g == nil || to < from {
		return nil, ErrNotFound
	}
	n := to - from + 1
	buf := make([]byte, n*entrySize)
	got, err := s.readFileUpTo(g.idxPath, buf, int64(from-g.base)*entrySize)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, got/entrySize)
	for i := range out {
		if out[i], err = s.entryAt(buf[i*entrySize:], g.idxPath, from+uint64(i)); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}

// Message reads (pid, seq).
func (s *Store) Message(pid []byte, seq uint64) (*Message, error) {
	s.mu.Lock()
	g := s.part(pid).find(seq)
	s.mu.Unlock()
	if g == nil {
		return nil, ErrNotFound
	}
	e, err := s.fileEntry(g, seq)
	if err != nil {
		return nil, err
	}
	b := make([]byte, e.Length)
	if err := s.readRecords(g.logPath, b, int64(e.Offset), seq); err != nil {
		return nil, err
	}
	if err := s.checkRecord(e, b, g.logPath, seq); err != nil {
		return nil, err
	}
	m := &Message{CreatedUs: e.CreatedUs}
	if err := decode(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Messages reads seqs from..to (inclusive) of a partition, in order, with as
// few reads as their segments allow. A seq it cannot find ends the list.
func (s *Store) Messages(pid []byte, from, to uint64) ([]*Message, error) {
	var out []*Message
	for seq := from; seq <= to; {
		ents, err := s.Entries(pid, seq, to)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return out, nil
			}
			return out, err
		}
		s.mu.Lock()
		g := s.part(pid).find(seq)
		s.mu.Unlock()
		first, last := ents[0], ents[len(ents)-1]
		span := make([]byte, int64(last.Offset)+int64(last.Length)-int64(first.Offset))
		if err := s.readRecords(g.logPath, span, int64(first.Offset), seq); err != nil {
			return out, err
		}
		for i, e := range ents {
			m := &Message{CreatedUs: e.CreatedUs}
			off := e.Offset - first.Offset
			rec := span[off : off+e.Length]
			if err := s.checkRecord(e, rec, g.logPath, seq+uint64(i)); err != nil {
				return out, err
			}
			if err := decode(rec, m); err != nil {
				return out, err
			}
			out = append(out, m)
		}
		seq += uint64(len(ents))
	}
	return out, nil
}

// TxnAt reads the transaction id of (pid, seq).
func (s *Store) TxnAt(pid []byte, seq uint64) (string, error) {
	m, err := s.Message(pid, seq)
	if err != nil {
		return "", err
	}
	return m.TxnID, nil
}

func (s *Store) readFile(path string, b []byte, off int64) error {
	n, err := s.readFileUpTo(path, b, off)
	if err == nil && n < len(b) {
		return ErrNotFound
	}
	return err
}

// readRecords reads the records of seq (and those after it) that b spans,
// at off of the segment log path. Their index entries say they were
// written, so a log that ends first is damaged, not a miss; a log that is
// gone (its segment removed) is a miss.
func (s *Store) readRecords(path string, b []byte, off int64, seq uint64) error {
	n, err := s.readFileUpTo(path, b, off)
	if err == nil && n < len(b) {
		return s.corrupt(&CorruptError{Path: path, Seq: seq, What: "record", Why: "is cut off (the file ends before it)"})
	}
	return err
}

// readFileUpTo reads as much of b as the file holds at off.
func (s *Store) readFileUpTo(path string, b []byte, off int64) (int, error) {
	f, release, err := s.files.get(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	defer release()
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// Size is the bytes the store's files hold.
func (s *Store) Size() int64 {
	var total int64
	filepath.WalkDir(s.dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// PartitionID is the partition id a directory of the store is named after.
func PartitionID(dirName string) ([]byte, bool) {
	b, err := hex.DecodeString(dirName)
	return b, err == nil && len(b) == 16
}

// EachEntry calls fn with the index entry of every seq from first to next-1
// in order, as flushed, until fn returns false.
func (s *Store) EachEntry(pid []byte, first, next uint64, fn func(seq uint64, e Entry) bool) error {
	return s.eachEntry(pid, first, next, false, fn, nil)
}

// eachEntry reads index entries from the files in pieces of up to 4096;
// with pending, entries past what a segment's files hold come from pend
// (the batch's unflushed writes).
func (s *Store) eachEntry(pid []byte, first, next uint64, pending bool, fn func(uint64, Entry) bool,
	pend func([]byte, uint64) (Entry, error)) error {
	for seq := first; seq < next; {
		s.mu.Lock()
		g := s.part(pid).find(seq)
		var count int64
		if g != nil {
			count = g.count
		}
		s.mu.Unlock()
		if g == nil {
			return ErrNotFound
		}
		i := int64(seq - g.base)
		if i >= count {
			if !pending {
				return ErrNotFound
			}
			e, err := pend(pid, seq)
			if err != nil {
				return err
			}
			if !fn(seq, e) {
				return nil
			}
			seq++
			continue
		}
		n := min(count-i, int64(next-seq), 4096)
		buf := make([]byte, n*entrySize)
		got, err := s.readFileUpTo(g.idxPath, buf, i*entrySize)
		if err != nil {
			return err
		}
		if got < entrySize {
			return ErrNotFound
		}
		for k := 0; k+entrySize <= got; k += entrySize {
			e, err := s.entryAt(buf[k:], g.idxPath, seq)
			if err != nil {
				return err
			}
			if !fn(seq, e) {
				return nil
			}
			seq++
		}
	}
	return nil
}
