package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"
)

// Magic opens every backup file.
const Magic = "QNBACKUP"

// FormatVersion is the version of the file layout this code writes and
// reads.
const FormatVersion = 1

// maxHeader bounds the header a reader accepts.
const maxHeader = 64 << 10

// Header describes a backup.
type Header struct {
	FormatVersion int       `json:"formatVersion"`
	LogFormat     uint32    `json:"logFormat"`   // command.LogFormat of the node that took it
	StateFormat   uint32    `json:"stateFormat"` // command.StateFormat of the snapshot
	Index         uint64    `json:"index"`       // Raft index of the snapshot: every entry up to it is in
	Term          uint64    `json:"term"`
	Size          int64     `json:"size"` // bytes of the snapshot
	CreatedAt     time.Time `json:"createdAt"`
	NodeID        string    `json:"nodeId"`
	Version       string    `json:"version"`
	// Group and Groups: with --raft-groups N > 1, the Raft group this
	// snapshot is of and N (both absent with one group).
	Group  int `json:"group,omitempty"`
	Groups int `json:"groups,omitempty"`
}

// GroupCount is the number of groups of the cluster the backup was taken
// of (1 for a cluster of one group).
func (h Header) GroupCount() int { return max(h.Groups, 1) }

// ErrNotBackup, ErrTruncated and ErrChecksum say why a file was refused.
var (
	ErrNotBackup = errors.New("not a queen-node backup")
	ErrTruncated = errors.New("backup is truncated")
	ErrChecksum  = errors.New("backup checksum does not match: the file is corrupted")
)

// Write writes a backup of the snapshot (exactly h.Size bytes) to w.
func Write(w io.Writer, h Header, snapshot io.Reader) error {
	h.FormatVersion = FormatVersion
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(hj)))
	for _, b := range [][]byte{[]byte(Magic), n[:], hj} {
		if _, err := mw.Write(b); err != nil {
			return err
		}
	}
	copied, err := io.Copy(mw, io.LimitReader(snapshot, h.Size))
	if err != nil {
		return fmt.Errorf("backup: snapshot: %w", err)
	}
	if copied != h.Size {
		return fmt.Errorf("backup: snapshot ended after %d of %d bytes", copied, h.Size)
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// File is a verified backup file: one record (a snapshot of one Raft
// group, or of the one group of a cluster without --raft-groups) or one
// record per group of a cluster (a whole-cluster backup with
// --raft-groups), one after the other.
type File struct {
	Header  Header   // the first record's
	Records []Record // in the file's order
	f       *os.File
}

// Record is one snapshot of a backup file.
type Record struct {
	Header Header
	offset int64 // where the record starts
	end    int64 // where it ends (after its checksum)
	snap   int64 // where its snapshot starts
}

// Snapshot reads the first record's snapshot, from its first byte.
func (b *File) Snapshot() io.Reader { return b.SnapshotOf(0) }

// SnapshotOf reads record i's snapshot.
func (b *File) SnapshotOf(i int) io.Reader {
	r := b.Records[i]
	return io.NewSectionReader(b.f, r.snap, r.Header.Size)
}

// RecordBytes reads record i whole (magic to checksum): a backup file of
// that record alone, to send to its group's leader.
func (b *File) RecordBytes(i int) io.Reader {
	r := b.Records[i]
	return io.NewSectionReader(b.f, r.offset, r.end-r.offset)
}

// Headers is every record's header.
func (b *File) Headers() []Header {
	out := make([]Header, len(b.Records))
	for i, r := range b.Records {
		out[i] = r.Header
	}
	return out
}

// Close closes the file.
func (b *File) Close() error { return b.f.Close() }

// Open opens and verifies the backup at path: each record's magic, header,
// format version, length and checksum, and that the records of several
// groups are of one cluster, each group once.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	recs, err := verify(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Header: recs[0].Header, Records: recs, f: f}, nil
}

func verify(f *os.File) ([]Record, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var recs []Record
	for offset := int64(0); offset < st.Size() || len(recs) == 0; {
		r, err := verifyRecord(f, offset, st.Size())
		if err != nil {
			if len(recs) > 0 {
				return nil, fmt.Errorf("record %d: %w", len(recs)+1, err)
			}
			return nil, err
		}
		recs = append(recs, r)
		offset = r.end
	}
	return recs, checkGroups(recs)
}

// checkGroups: several records are one per group of one cluster.
func checkGroups(recs []Record) error {
	if len(recs) == 1 {
		return nil
	}
	n := recs[0].Header.GroupCount()
	seen := map[int]bool{}
	for _, r := range recs {
		h := r.Header
		if h.GroupCount() != n || h.Group < 0 || h.Group >= n || seen[h.Group] {
			return fmt.Errorf("%w: %d records are not one per group of one cluster of %d groups", ErrNotBackup, len(recs), n)
		}
		seen[h.Group] = true
	}
	if len(recs) != n {
		return fmt.Errorf("%w: %d records of a cluster of %d groups", ErrTruncated, len(recs), n)
	}
	return nil
}

// verifyRecord verifies the record at offset of a file of size bytes.
func verifyRecord(f *os.File, offset, size int64) (Record, error) {
	rec := Record{offset: offset}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return rec, err
	}
	sum := sha256.New()
	r := io.TeeReader(f, sum)
	head := make([]byte, len(Magic)+4)
	if _, err := io.ReadFull(r, head); err != nil || string(head[:len(Magic)]) != Magic {
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return rec, ErrNotBackup
		}
		return rec, err
	}
	hl := int64(binary.BigEndian.Uint32(head[len(Magic):]))
	if hl == 0 || hl > maxHeader {
		return rec, fmt.Errorf("%w: header length %d", ErrNotBackup, hl)
	}
	hj := make([]byte, hl)
	if _, err := io.ReadFull(r, hj); err != nil {
		return rec, fmt.Errorf("%w: in the header", ErrTruncated)
	}
	h := &rec.Header
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		return rec, fmt.Errorf("%w: header does not decode: %v", ErrNotBackup, err)
	}
	if h.FormatVersion != FormatVersion {
		return rec, fmt.Errorf("backup format version %d; this queen-node reads version %d", h.FormatVersion, FormatVersion)
	}
	if h.Size < 0 {
		return rec, fmt.Errorf("%w: snapshot size %d", ErrNotBackup, h.Size)
	}
	rec.snap = offset + int64(len(head)) + hl
	rec.end = rec.snap + h.Size + sha256.Size
	if size < rec.end {
		return rec, fmt.Errorf("%w: %d bytes, the header says %d", ErrTruncated, size-offset, rec.end-offset)
	}
	if err := copyN(sum, f, h.Size); err != nil {
		return rec, err
	}
	var trailer [sha256.Size]byte
	if _, err := io.ReadFull(f, trailer[:]); err != nil {
		return rec, fmt.Errorf("%w: in the checksum", ErrTruncated)
	}
	if !bytes.Equal(trailer[:], sum.Sum(nil)) {
		return rec, ErrChecksum
	}
	if h.GroupCount() == 1 && size > rec.end {
		return rec, fmt.Errorf("%w: %d bytes after its end", ErrNotBackup, size-rec.end)
	}
	return rec, nil
}

func copyN(dst hash.Hash, src io.Reader, n int64) error {
	if _, err := io.CopyN(dst, src, n); err != nil {
		return fmt.Errorf("%w: in the snapshot: %v", ErrTruncated, err)
	}
	return nil
}
