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
}

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

// File is a verified backup file.
type File struct {
	Header Header
	f      *os.File
	offset int64 // where the snapshot starts
}

// Snapshot reads the snapshot, from its first byte.
func (b *File) Snapshot() io.Reader { return io.NewSectionReader(b.f, b.offset, b.Header.Size) }

// Close closes the file.
func (b *File) Close() error { return b.f.Close() }

// Open opens and verifies the backup at path: magic, header, format
// version, length and checksum.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	h, offset, err := verify(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Header: h, f: f, offset: offset}, nil
}

func verify(f *os.File) (Header, int64, error) {
	var h Header
	st, err := f.Stat()
	if err != nil {
		return h, 0, err
	}
	sum := sha256.New()
	r := io.TeeReader(f, sum)
	head := make([]byte, len(Magic)+4)
	if _, err := io.ReadFull(r, head); err != nil || string(head[:len(Magic)]) != Magic {
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return h, 0, ErrNotBackup
		}
		return h, 0, err
	}
	hl := int64(binary.BigEndian.Uint32(head[len(Magic):]))
	if hl == 0 || hl > maxHeader {
		return h, 0, fmt.Errorf("%w: header length %d", ErrNotBackup, hl)
	}
	hj := make([]byte, hl)
	if _, err := io.ReadFull(r, hj); err != nil {
		return h, 0, fmt.Errorf("%w: in the header", ErrTruncated)
	}
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, 0, fmt.Errorf("%w: header does not decode: %v", ErrNotBackup, err)
	}
	if h.FormatVersion != FormatVersion {
		return h, 0, fmt.Errorf("backup format version %d; this queen-node reads version %d", h.FormatVersion, FormatVersion)
	}
	offset := int64(len(head)) + hl
	if want := offset + h.Size + sha256.Size; st.Size() != want {
		if st.Size() < want {
			return h, 0, fmt.Errorf("%w: %d bytes, the header says %d", ErrTruncated, st.Size(), want)
		}
		return h, 0, fmt.Errorf("%w: %d bytes after its end", ErrNotBackup, st.Size()-want)
	}
	if err := copyN(sum, f, h.Size); err != nil {
		return h, 0, err
	}
	var trailer [sha256.Size]byte
	if _, err := io.ReadFull(f, trailer[:]); err != nil {
		return h, 0, fmt.Errorf("%w: in the checksum", ErrTruncated)
	}
	if !bytes.Equal(trailer[:], sum.Sum(nil)) {
		return h, 0, ErrChecksum
	}
	return h, offset, nil
}

func copyN(dst hash.Hash, src io.Reader, n int64) error {
	if _, err := io.CopyN(dst, src, n); err != nil {
		return fmt.Errorf("%w: in the snapshot: %v", ErrTruncated, err)
	}
	return nil
}
