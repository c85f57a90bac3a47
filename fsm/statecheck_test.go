package fsm

import (
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

func kvPut(key string) *command.Command {
	return &command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: []*command.KVOp{marker(key, false)}}}}
}

func stateCheck() *command.Command {
	return &command.Command{Skippable: true, Body: &command.Command_StateCheck{StateCheck: &command.StateCheck{}}}
}

// checkDigests records what OnStateCheck was handed: the index of each
// check and the digest of the view as of it.
func checkDigests(h *harness) map[uint64]string {
	got := map[uint64]string{}
	h.f.opts.OnStateCheck = func(index uint64, view store.Reader, release func()) {
		defer release()
		got[index] = CheckDigest(view, io.Discard)
	}
	return got
}

// A state check in the middle of what Raft hands over as one batch is a
// point: the view it is handed holds the state as of the check, not of the
// batch's end, so replicas whose batches were cut differently digest the
// same state.
func TestAStateCheckDigestsTheStateAsOfItsEntry(t *testing.T) {
	one := newHarness(t)
	oneChecks := checkDigests(one)
	one.f.ApplyBatch([]*raft.Log{one.entry(kvPut("a")), one.entry(stateCheck()), one.entry(kvPut("b"))})

	two := newHarness(t)
	twoChecks := checkDigests(two)
	two.f.ApplyBatch([]*raft.Log{two.entry(kvPut("a"))})
	two.f.ApplyBatch([]*raft.Log{two.entry(stateCheck())})
	var after string
	two.f.opts.OnStateCheck = nil
	two.f.ApplyBatch([]*raft.Log{two.entry(kvPut("b"))})
	_ = two.db.View(func(r store.Reader) error { after = CheckDigest(r, io.Discard); return nil })

	if len(oneChecks) != 1 || oneChecks[2] == "" {
		t.Fatalf("checks handed over in one batch: %v, want index 2", oneChecks)
	}
	if oneChecks[2] != twoChecks[2] {
		t.Fatalf("the check's digest depends on how the batch was cut: %s vs %s", oneChecks[2], twoChecks[2])
	}
	if after == oneChecks[2] {
		t.Fatal("the digest did not change with the entry after the check: it digests nothing")
	}
	if one.f.AppliedIndex() != 3 {
		t.Fatalf("applied %d after the batch, want 3", one.f.AppliedIndex())
	}
}
