package fsm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/msgstore"
)

// damagedHarness is a harness whose FSM reports damage to a report the
// test reads, over a data dir the test can damage.
func damagedHarness(t *testing.T) (*harness, *damage.Report, string) {
	t.Helper()
	dir := t.TempDir()
	rep := damage.New(nil, nil)
	f := openFSM(t, dir, CommitEvery)
	f.opts.Damage = rep
	f.msgs.OnCorrupt(func(err error) { rep.Note(damage.MessageFiles, err) })
	h := &harness{t: t, f: f, db: f.db, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}
	return h, rep, dir
}

// A log entry whose bytes changed halts apply before anything of its batch
// is applied; the node says why and applies nothing after it.
func TestADamagedEntryHaltsApply(t *testing.T) {
	h, rep, _ := damagedHarness(t)
	h.push(item("q", "", "a"))
	before, applied := stateHash(t, h.f), h.f.AppliedIndex()
	bad := h.entry(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "b")}}}})
	bad.Data[len(bad.Data)/2] ^= 0x08
	next := h.entry(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "c")}}}})
	resps := h.f.ApplyBatch([]*raft.Log{bad, next})
	if resps[0] != nil || resps[1] != nil {
		t.Fatalf("a halted batch answered %v", resps)
	}
	eq(t, "state after a damaged entry", stateHash(t, h.f), before)
	eq(t, "applied index", h.f.AppliedIndex(), applied)
	eq(t, "halted", h.f.Halted(), true)
	first, n, ok := rep.Damaged()
	if !ok || n != 1 || first.Where != damage.RaftLog {
		t.Fatalf("damage report: %+v %d %v", first, n, ok)
	}
	if _, err := h.f.Snapshot(); err == nil {
		t.Fatal("a halted FSM took a snapshot")
	}
}

// flipInPlace flips a bit of the last byte but one of every segment log
// under dir/messages, in place (open handles see it); twice undoes it.
func flipInPlace(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "messages", "*", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no segment files")
	}
	for _, p := range logs {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, 1)
		off := st.Size() - 2 // inside the last record's payload
		f.ReadAt(b, off)
		b[0] ^= 0x01
		f.WriteAt(b, off)
		f.Close()
	}
}

// A damaged message record is never served: the read that finds it is an
// error, and the node reports it. A command whose outcome depends on it
// (here a push whose transaction id may repeat the damaged record's) halts
// apply instead of deciding on bytes the other replicas do not have.
func TestDamagedMessageFilesAreNeverServed(t *testing.T) {
	h, rep, dir := damagedHarness(t)
	h.push(item("q", "", "a"), item("q", "", "b"))
	pr := h.pop("q", batch(2))
	if len(pr.Messages) != 2 {
		t.Fatalf("popped %d", len(pr.Messages))
	}
	before, applied := stateHash(t, h.f), h.f.AppliedIndex()
	flipInPlace(t, dir)
	var err error
	h.read(func(r *Reader) {
		_, err = r.Messages(pr.Messages[0].PartitionId, pr.Messages[0].Seq, pr.Messages[1].Seq)
	})
	if !errors.Is(err, msgstore.ErrCorrupt) {
		t.Fatalf("reading a damaged record: %v, want msgstore.ErrCorrupt", err)
	}
	if _, _, ok := rep.Damaged(); !ok {
		t.Fatal("the damaged read was not reported")
	}
	eq(t, "halted by a read", h.f.Halted(), false)

	resp := h.f.Apply(h.entry(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "b")}}}}))
	if resp != nil {
		t.Fatalf("a push that read damaged bytes answered %v", resp)
	}
	eq(t, "halted by apply", h.f.Halted(), true)
	eq(t, "applied index", h.f.AppliedIndex(), applied)
	flipInPlace(t, dir) // undone: nothing else changed
	eq(t, "state", stateHash(t, h.f), before)
}
