package grpcapi

import (
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
)

// The public queue options and the stored ones are converted through their
// wire bytes (sameFields), so they must have the same fields under the same
// numbers, with the same kinds.
func TestQueueOptionsMatch(t *testing.T) {
	pub := (&queenpb.QueueOptions{}).ProtoReflect().Descriptor().Fields()
	cmd := (&command.QueueOptions{}).ProtoReflect().Descriptor().Fields()
	if pub.Len() != cmd.Len() {
		t.Fatalf("%d public options, %d stored", pub.Len(), cmd.Len())
	}
	for i := 0; i < pub.Len(); i++ {
		p := pub.Get(i)
		c := cmd.ByNumber(p.Number())
		if c == nil || c.Name() != p.Name() || c.Kind() != p.Kind() || c.HasPresence() != p.HasPresence() {
			t.Errorf("option %d: public %s %v, stored %v", p.Number(), p.Name(), p.Kind(), c)
		}
	}
	v := int64(-7)
	on := true
	back := sameFields(sameFields(&queenpb.QueueOptions{Priority: &v, EncryptionEnabled: &on}, &command.QueueOptions{}), &queenpb.QueueOptions{})
	if back.GetPriority() != -7 || !back.GetEncryptionEnabled() || back.LeaseTime != nil {
		t.Fatalf("round trip: %v", back)
	}
}
