package fsm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// An entry of another log format stops the replica with a message that
// names both formats, instead of being misread.
func TestEntryOfAnotherFormatPanics(t *testing.T) {
	for _, format := range []uint32{0, command.LogFormat + 1} {
		h := newHarness(t)
		data, _ := proto.Marshal(&command.Command{Format: format, Body: &command.Command_Noop{Noop: &command.Noop{}}})
		func() {
			defer func() {
				msg := fmt.Sprint(recover())
				found := max(format, 1)
				if !strings.Contains(msg, fmt.Sprintf("format %d", found)) || !strings.Contains(msg, fmt.Sprintf("format %d", command.LogFormat)) {
					t.Fatalf("entry of format %d: panic %q", format, msg)
				}
			}()
			h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		}()
		eq(t, "nothing applied", h.f.AppliedIndex(), uint64(0))
	}
}

// A snapshot of another state format is refused, and the state it would
// have replaced stays.
func TestSnapshotOfAnotherFormatIsRefused(t *testing.T) {
	src := newHarness(t)
	src.push(item("q", "", "a"))
	old := proto.Clone(src.f.meta).(*command.MetaRecord)
	old.StateFormat = 0 // as format 1 wrote it
	if err := src.db.Update(func(b *store.Batch) error { return b.Put(bMeta, metaKey, command.MustEncodeRecord(old)) }); err != nil {
		t.Fatal(err)
	}
	image := snapshotOf(t, src.f)
	dst := newHarness(t)
	dst.push(item("mine", "", "b"))
	before := stateHash(t, dst.f)
	err := dst.f.Restore(io.NopCloser(bytes.NewReader(image)))
	if err == nil || !strings.Contains(err.Error(), "format 1") {
		t.Fatalf("restore of a format-1 snapshot: %v", err)
	}
	eq(t, "state kept", stateHash(t, dst.f), before)
}
