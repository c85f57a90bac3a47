package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
)

func TestSameIdempotencyKeyInFlightIsRefused(t *testing.T) {
	n := mustStartNode(t)
	cmd := func() *command.Command {
		return &command.Command{Idempotency: &command.Idempotency{Key: "k", RequestHash: []byte("h"), TtlSeconds: 60},
			Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{{Queue: "q", Partition: "Default",
				TransactionId: "t", Payload: []byte("1"), MessageId: make([]byte, 16)}}}}}
	}
	// Hold the key as if a first request were being applied right now.
	done, err := n.inflight.Begin("k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(context.Background(), cmd()); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("second request while the first is in flight: %v", err)
	}
	done()
	if _, err := n.Apply(context.Background(), cmd()); err != nil {
		t.Fatal(err)
	}
	res, err := n.Apply(context.Background(), cmd())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.(*command.Replay); !ok {
		t.Fatalf("retry after completion got %T, want a replay", res)
	}
}
