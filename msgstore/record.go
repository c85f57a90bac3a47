package msgstore

import (
	"encoding/binary"
	"errors"
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

// Entry is a message's index entry: where its record is and what a state
// machine needs to know about it without reading the record.
type Entry struct {
	Offset    uint32
	Length    uint32
	CreatedUs int64
	TxnHash   uint64 // TxnHash(TxnID)
}

const entrySize = 24

func (e Entry) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], e.Offset)
	binary.BigEndian.PutUint32(b[4:], e.Length)
	binary.BigEndian.PutUint64(b[8:], uint64(e.CreatedUs))
	binary.BigEndian.PutUint64(b[16:], e.TxnHash)
}

func readEntry(b []byte) Entry {
	return Entry{
		Offset: binary.BigEndian.Uint32(b[0:]), Length: binary.BigEndian.Uint32(b[4:]),
		CreatedUs: int64(binary.BigEndian.Uint64(b[8:])), TxnHash: binary.BigEndian.Uint64(b[16:]),
	}
}

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

var errCorrupt = errors.New("msgstore: corrupt record")

// decode reads a record into m (the payload aliases b).
func decode(b []byte, m *Message) error {
	if len(b) < 16 {
		return errCorrupt
	}
	m.ID, b = b[:16:16], b[16:]
	var strs [3]string
	for i := range strs {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errCorrupt
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
		return "", errCorrupt
	}
	b = b[16:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", errCorrupt
	}
	return string(b[k : k+int(n)]), nil
}
