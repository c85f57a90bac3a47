package queue

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// maxSize is checked when the buffer takes a push, never when it appends
// it: an item answered "buffered" is never dropped. (fsm's
// TestPushMaintenanceBuffersThenAppendsInOrder drives the buffer through
// the push maintenance switch.)
func TestBufferedPushesPassMaxSizeWhenAppended(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{MaxSize: ptr(int64(2))})
	res := h.buffer(item("q", "", "a"), item("q", "", "b"), item("q", "", "c"))
	for _, r := range res {
		eq(t, "buffered", r.Status, command.PushItemResult_BUFFERED)
	}
	h.drain(10)
	eqList(t, "all three appended", h.txnsOf(h.popq("q", batch(10))), []string{"a", "b", "c"})
	// Now at maxSize: the buffer refuses at once, as a push would.
	eq(t, "refused while full", h.buffer(item("q", "", "d"))[0].Status, command.PushItemResult_FAILED)
}
