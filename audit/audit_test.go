package audit

import (
	"path/filepath"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Records are kept newest first in List, and only the newest MaxRecords.
func TestTheTrailKeepsTheNewest(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), []store.Bucket{Bucket}, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var count uint64
	del := func(i int) *command.AuditRecord {
		return &command.AuditRecord{AtUs: int64(i), Actor: "ops", Action: "delete_queue", Detail: `queue="q"`}
	}
	n := MaxRecords + 5
	err = db.Update(func(b *store.Batch) error {
		for i := 1; i <= n; i++ {
			tx := b.Begin()
			Record(tx, uint64(2*i), del(i), &count)
			if err := tx.Commit(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count != MaxRecords {
		t.Fatalf("count %d, want %d", count, MaxRecords)
	}
	var recs []*command.AuditRecord
	db.View(func(r store.Reader) error { recs = List(r, 0, MaxRecords+10); return nil })
	if len(recs) != MaxRecords || recs[0].Index != uint64(2*n) || recs[len(recs)-1].Index != uint64(2*(n-MaxRecords+1)) ||
		recs[0].Actor != "ops" || recs[0].Action != "delete_queue" || recs[0].Detail != `queue="q"` {
		t.Fatalf("%d records, newest %+v, oldest %+v", len(recs), recs[0], recs[len(recs)-1])
	}
	db.View(func(r store.Reader) error { recs = List(r, uint64(2*n), 2); return nil })
	if len(recs) != 2 || recs[0].Index != uint64(2*(n-1)) {
		t.Fatalf("before the newest: %+v", recs)
	}
}
