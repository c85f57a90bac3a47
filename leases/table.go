package leases

import (
	"bytes"
	"encoding/binary"

	"github.com/queen-node/queen-node/store"
)

// The lease table indexes every live lease by id (an extend names only the
// id) and by expiry (a sweep visits what has expired and nothing else).
// The lease itself (its run and acks) lives with the cursor it holds; the
// table says where the holders are. Lease ids are UUIDv7 minted by the
// proposer, so both indexes grow at their ends.
var (
	bByID     = store.Bucket("lease_ids")    // leaseId 0 pid group → expiresUs
	bByExpiry = store.Bucket("lease_expiry") // expiresUs leaseId 0 pid group → nil
)

// Buckets lists the table's buckets, for store.Open.
var Buckets = []store.Bucket{bByID, bByExpiry}

// Holder is one (partition, group) a lease holds.
type Holder struct {
	LeaseID   string
	PID       []byte // 16 bytes
	Group     string
	ExpiresUs int64
}

// Tx is the part of a command's staged transaction the table writes to.
type Tx interface {
	store.Reader
	Put(b store.Bucket, key, value []byte)
	Delete(b store.Bucket, key []byte)
}

func idKey(leaseID string, pid []byte, group string) []byte {
	k := make([]byte, 0, len(leaseID)+1+len(pid)+len(group))
	k = append(k, leaseID...)
	k = append(k, 0)
	k = append(k, pid...)
	return append(k, group...)
}

func expiryKey(expiresUs int64, id []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(expiresUs)), id...)
}

// Put records that leaseID holds (pid, group) until expiresUs.
func Put(tx Tx, h Holder) {
	id := idKey(h.LeaseID, h.PID, h.Group)
	tx.Put(bByID, id, binary.BigEndian.AppendUint64(nil, uint64(h.ExpiresUs)))
	tx.Put(bByExpiry, expiryKey(h.ExpiresUs, id), nil)
}

// Remove forgets a holder (its lease was released, or swept).
func Remove(tx Tx, leaseID string, pid []byte, group string) {
	id := idKey(leaseID, pid, group)
	if v := tx.Get(bByID, id); len(v) == 8 {
		tx.Delete(bByExpiry, expiryKey(int64(binary.BigEndian.Uint64(v)), id))
	}
	tx.Delete(bByID, id)
}

// Holders lists what leaseID holds.
func Holders(r store.Reader, leaseID string) []Holder {
	pfx := append([]byte(leaseID), 0)
	var out []Holder
	c := r.Cursor(bByID)
	for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
		if h, ok := parseID(k, v); ok {
			out = append(out, h)
		}
	}
	return out
}

func parseID(k, v []byte) (Holder, bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(k)-i-1 < 16 || len(v) != 8 {
		return Holder{}, false
	}
	rest := k[i+1:]
	return Holder{LeaseID: string(k[:i]), PID: append([]byte(nil), rest[:16]...), Group: string(rest[16:]),
		ExpiresUs: int64(binary.BigEndian.Uint64(v))}, true
}

// Expired lists up to limit holders whose lease expired at or before now,
// earliest first, and whether more have.
func Expired(r store.Reader, now int64, limit int) ([]Holder, bool) {
	var out []Holder
	c := r.Cursor(bByExpiry)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) < 8 || int64(binary.BigEndian.Uint64(k)) > now {
			break
		}
		if len(out) == limit {
			return out, true
		}
		id := k[8:]
		if h, ok := parseID(id, k[:8]); ok {
			out = append(out, h)
		}
	}
	return out, false
}

// Due reports whether any lease expired at or before now.
func Due(r store.Reader, now int64) bool {
	k, _ := r.Cursor(bByExpiry).First()
	return len(k) >= 8 && int64(binary.BigEndian.Uint64(k)) <= now
}
