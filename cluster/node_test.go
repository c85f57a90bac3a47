package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

func TestSameIdempotencyKeyInFlightIsRefused(t *testing.T) {
	n := mustStartNode(t)
	cmd := func() *fsmpb.Command {
		return &fsmpb.Command{Idempotency: &fsmpb.Idempotency{Key: "k", RequestHash: []byte("h"), TtlSeconds: 60},
			Body: &fsmpb.Command_Push{Push: &fsmpb.Push{Items: []*fsmpb.PushItem{{Queue: "q", Partition: "Default",
				TransactionId: "t", Payload: []byte("1"), MessageId: make([]byte, 16)}}}}}
	}
	// Hold the key as if a first request were being applied right now.
	n.inflight.Store("k", struct{}{})
	if _, err := n.Apply(context.Background(), cmd()); !errors.Is(err, ErrInFlight) {
		t.Fatalf("second request while the first is in flight: %v", err)
	}
	n.inflight.Delete("k")
	if _, err := n.Apply(context.Background(), cmd()); err != nil {
		t.Fatal(err)
	}
	res, err := n.Apply(context.Background(), cmd())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.(*fsmpb.Replay); !ok {
		t.Fatalf("retry after completion got %T, want a replay", res)
	}
}
