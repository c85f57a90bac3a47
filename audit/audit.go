package audit

import (
	"encoding/binary"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Bucket holds the trail: entry index → AuditRecord.
var Bucket = store.Bucket("audit")

// MaxRecords is how many records are kept; the oldest go first.
const MaxRecords = 10000

func key(index uint64) []byte { return binary.BigEndian.AppendUint64(nil, index) }

// Record writes rec, the record of an audited command applied at index
// (its kind names the action and detail: fsm.Kind.Audit), and drops the
// oldest beyond MaxRecords; count is the number of records stored (the
// FSM keeps it in its meta record).
func Record(tx *store.Tx, index uint64, rec *command.AuditRecord, count *uint64) {
	rec.Index = index
	tx.Put(Bucket, key(index), command.MustEncodeRecord(rec))
	*count++
	for *count > MaxRecords {
		k, _ := tx.Cursor(Bucket).First()
		if k == nil {
			*count = 0
			return
		}
		tx.Delete(Bucket, append([]byte(nil), k...))
		*count--
	}
}

// List returns up to limit records, newest first, of entries before the
// index before (0 = from the newest).
func List(r store.Reader, before uint64, limit int) []*command.AuditRecord {
	var out []*command.AuditRecord
	c := r.Cursor(Bucket)
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else {
		k, v = c.Seek(key(before))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		rec := &command.AuditRecord{}
		command.MustDecodeRecord(v, rec)
		out = append(out, rec)
	}
	return out
}
