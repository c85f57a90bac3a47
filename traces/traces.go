package traces

import (
	"bytes"
	"encoding/binary"
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Buckets of the state file this package owns.
var (
	// pid seq(8) index(8) n(4) → TraceRecord
	bTraces = store.Bucket("traces")
	// name 0x00 createdUs(8) index(8) n(4) → the trace's key in bTraces
	bNames = store.Bucket("trace_names")
)

// Buckets lists them, for store.Open.
var Buckets = []store.Bucket{bTraces, bNames}

// Writer is what the package writes through: a command's staged
// transaction.
type Writer interface {
	store.Reader
	Put(b store.Bucket, k, v []byte)
	Delete(b store.Bucket, k []byte)
}

func msgKey(pid []byte, seq uint64) []byte {
	k := make([]byte, 0, len(pid)+8)
	k = append(k, pid...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func nameKey(name string, us int64, tail []byte) []byte {
	k := make([]byte, 0, len(name)+1+8+12)
	k = append(k, name...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, uint64(us))
	return append(k, tail[len(tail)-12:]...) // index and ordinal of the trace's key
}

// Add stores rec (its CreatedUs the entry's time) as the entry index's
// n-th trace.
func Add(w Writer, rec *command.TraceRecord, index uint64, n uint32) {
	k := msgKey(rec.PartitionId, rec.Seq)
	k = binary.BigEndian.AppendUint64(k, index)
	k = binary.BigEndian.AppendUint32(k, n)
	w.Put(bTraces, k, command.MustEncodeRecord(rec))
	for _, name := range uniqueNames(rec.TraceNames) {
		w.Put(bNames, nameKey(name, rec.CreatedUs, k), k)
	}
}

func uniqueNames(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	j := 0
	for i, n := range out {
		if i == 0 || n != out[j-1] {
			out[j] = n
			j++
		}
	}
	return out[:j]
}

// RemoveMessage removes every trace of (pid, seq); it returns how many.
func RemoveMessage(w Writer, pid []byte, seq uint64) int {
	return removeRange(w, msgKey(pid, seq), msgKey(pid, seq+1), 0)
}

// RemoveBefore removes the traces of pid's messages below first (retention
// removed them).
func RemoveBefore(w Writer, pid []byte, first uint64) int {
	return removeRange(w, msgKey(pid, 0), msgKey(pid, first), 0)
}

// RemovePartition removes up to limit traces of pid (a deleted queue's
// partition) and reports how many, and whether more remain.
func RemovePartition(w Writer, pid []byte, limit int) (int, bool) {
	n := removeRange(w, pid, append(append([]byte(nil), pid...), bytes.Repeat([]byte{0xff}, 21)...), limit+1)
	if n > limit {
		return limit, true
	}
	return n, false
}

// removeRange removes the traces with keys in [from, to), at most limit
// (0 = all); when limit is reached it removes limit-1 and returns limit,
// so a caller can tell that more remain.
func removeRange(w Writer, from, to []byte, limit int) int {
	type kv struct{ k, v []byte }
	var found []kv
	c := w.Cursor(bTraces)
	for k, v := c.Seek(from); k != nil && bytes.Compare(k, to) < 0; k, v = c.Next() {
		if limit > 0 && len(found) == limit {
			break
		}
		found = append(found, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
	}
	n := len(found)
	if limit > 0 && n == limit {
		found = found[:n-1]
	}
	for _, f := range found {
		rec := &command.TraceRecord{}
		command.MustDecodeRecord(f.v, rec)
		for _, name := range uniqueNames(rec.TraceNames) {
			w.Delete(bNames, nameKey(name, rec.CreatedUs, f.k))
		}
		w.Delete(bTraces, f.k)
	}
	return n
}

// OfMessage lists the traces of (pid, seq), oldest first.
func OfMessage(r store.Reader, pid []byte, seq uint64) []*command.TraceRecord {
	var out []*command.TraceRecord
	from, to := msgKey(pid, seq), msgKey(pid, seq+1)
	c := r.Cursor(bTraces)
	for k, v := c.Seek(from); k != nil && bytes.Compare(k, to) < 0; k, v = c.Next() {
		rec := &command.TraceRecord{}
		command.MustDecodeRecord(v, rec)
		out = append(out, rec)
	}
	return out
}

// ByName lists the traces named name, newest first, that keep passes
// (the reader's view of live, visible partitions), skipping offset and
// returning at most limit, with how many match in all.
func ByName(r store.Reader, name string, keep func(*command.TraceRecord) bool, offset, limit int) ([]*command.TraceRecord, int) {
	pfx := append([]byte(name), 0)
	end := append(append([]byte(nil), pfx...), bytes.Repeat([]byte{0xff}, 21)...)
	var out []*command.TraceRecord
	total := 0
	c := r.Cursor(bNames)
	k, v := c.Seek(end)
	if k == nil {
		k, v = c.Last()
	}
	for ; k != nil; k, v = c.Prev() {
		if !bytes.HasPrefix(k, pfx) {
			if bytes.Compare(k, pfx) < 0 {
				break
			}
			continue
		}
		tv := r.Get(bTraces, v)
		if tv == nil {
			continue
		}
		rec := &command.TraceRecord{}
		command.MustDecodeRecord(tv, rec)
		if keep != nil && !keep(rec) {
			continue
		}
		if total >= offset && len(out) < limit {
			out = append(out, rec)
		}
		total++
	}
	return out, total
}

// Name is one trace name with its counts.
type Name struct {
	Name       string
	Traces     int
	Messages   int
	LastSeenUs int64
}

// Names lists every trace name in name order with its counts, over the
// traces whose partition live accepts (nil = all).
func Names(r store.Reader, live func(pid []byte) bool) []Name {
	var out []Name
	var cur *Name
	msgs := map[string]bool{}
	c := r.Cursor(bNames)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(v) < 16+8 {
			continue
		}
		if live != nil && !live(v[:16]) {
			continue
		}
		name := string(k[:i])
		if cur == nil || cur.Name != name {
			out = append(out, Name{Name: name})
			cur = &out[len(out)-1]
			clear(msgs)
		}
		cur.Traces++
		if m := string(v[:24]); !msgs[m] {
			msgs[m] = true
			cur.Messages++
		}
		if len(k) >= i+9 {
			cur.LastSeenUs = max(cur.LastSeenUs, int64(binary.BigEndian.Uint64(k[i+1:])))
		}
	}
	return out
}
