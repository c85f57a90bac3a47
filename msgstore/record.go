package msgstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Message is one stored message.
type Message struct {
	ID          []byte // 16 bytes
	TxnID       string
	TraceID     string
	ProducerSub string
	CreatedUs   int64
	Payload     []byte // JSON text
}

// Entry is a message's index entry: where its record is, the record's
// checksum, and what a state machine needs to know about the message
// without reading the record.
type Entry struct {
	Offset    uint32
	Length    uint32
	CreatedUs int64
	TxnHash   uint64 // TxnHash(TxnID)
	CRC       uint32 // CRC-32C of the record
}

// An index entry on disk: offset, length, createdAt, txn hash, the record's
// CRC-32C, then the CRC-32C of those 28 bytes.
const (
	entrySize       = 32
	legacyEntrySize = 24 // state format 3: no checksums (migrated at open)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func (e Entry) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], e.Offset)
	binary.BigEndian.PutUint32(b[4:], e.Length)
	binary.BigEndian.PutUint64(b[8:], uint64(e.CreatedUs))
	binary.BigEndian.PutUint64(b[16:], e.TxnHash)
	binary.BigEndian.PutUint32(b[24:], e.CRC)
	binary.BigEndian.PutUint32(b[28:], checksum(b[:28]))
}

// readEntry decodes an index entry; false when its checksum fails.
func readEntry(b []byte) (Entry, bool) {
	e := Entry{
		Offset: binary.BigEndian.Uint32(b[0:]), Length: binary.BigEndian.Uint32(b[4:]),
		CreatedUs: int64(binary.BigEndian.Uint64(b[8:])), TxnHash: binary.BigEndian.Uint64(b[16:]),
		CRC: binary.BigEndian.Uint32(b[24:]),
	}
	return e, binary.BigEndian.Uint32(b[28:]) == checksum(b[:28])
}

// ErrCorrupt: bytes read from a segment file are not the bytes written (a
// checksum fails, or a record does not parse). A *CorruptError says where.
var ErrCorrupt = errors.New("msgstore: corrupt data")

// CorruptError is a damaged index entry or record, found when it was read.
// The store never returns its bytes.
type CorruptError struct {
	Path string
	Seq  uint64
	What string // "index entry", "record"
	Why  string // "" = its CRC-32C fails
}

func (e *CorruptError) Error() string {
	why := e.Why
	if why == "" {
		why = "fails its CRC-32C"
	}
	return fmt.Sprintf("msgstore: %s of seq %d in %s %s: the file is damaged on this node", e.What, e.Seq, e.Path, why)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// entryAt decodes the index entry of seq read from path.
func (s *Store) entryAt(b []byte, path string, seq uint64) (Entry, error) {
	e, ok := readEntry(b)
	if !ok {
		return Entry{}, s.corrupt(&CorruptError{Path: path, Seq: seq, What: "index entry"})
	}
	return e, nil
}

// checkRecord verifies rec, the record of seq read from path, against its
// entry.
func (s *Store) checkRecord(e Entry, rec []byte, path string, seq uint64) error {
	if uint32(len(rec)) != e.Length || checksum(rec) != e.CRC {
		return s.corrupt(&CorruptError{Path: path, Seq: seq, What: "record"})
	}
	return nil
}

// corrupt tells the store's owner (OnCorrupt) and returns err.
func (s *Store) corrupt(err *CorruptError) error {
	if fn := s.onCorrupt.Load(); fn != nil {
		(*fn)(err)
	}
	return err
}

// OnCorrupt sets what the store calls, in the reading goroutine, each time
// a read finds damaged bytes.
func (s *Store) OnCorrupt(fn func(error)) { s.onCorrupt.Store(&fn) }

// TxnHash is the hash the index keeps of a transaction id. It is the same in
// every process: FNV-1a 64, not a seeded hash.
func TxnHash(txn string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(txn); i++ {
		h ^= uint64(txn[i])
		h *= 1099511628211
	}
	return h
}

// encodedSize is the length of m's record.
func encodedSize(m *Message) int {
	n := 16 + len(m.Payload)
	for _, s := range []string{m.TxnID, m.TraceID, m.ProducerSub} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// encode appends m's record: id, then the three strings with their
// lengths, then the payload (the rest of the record).
func encode(dst []byte, m *Message) []byte {
	id := m.ID
	if len(id) != 16 {
		id = make([]byte, 16)
	}
	dst = append(dst, id...)
	for _, s := range []string{m.TxnID, m.TraceID, m.ProducerSub} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, m.Payload...)
}

// decode reads a record into m (the payload aliases b).
func decode(b []byte, m *Message) error {
	if len(b) < 16 {
		return ErrCorrupt
	}
	m.ID, b = b[:16:16], b[16:]
	var strs [3]string
	for i := range strs {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return ErrCorrupt
		}
		strs[i], b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	m.TxnID, m.TraceID, m.ProducerSub = strs[0], strs[1], strs[2]
	m.Payload = b
	return nil
}

// txnOf reads only the transaction id of a record.
func txnOf(b []byte) (string, error) {
	if len(b) < 16 {
		return "", ErrCorrupt
	}
	b = b[16:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", ErrCorrupt
	}
	return string(b[k : k+int(n)]), nil
}
