package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
)

// as makes cmd a command of tenant key.
func as(key string, cmd *command.Command) *command.Command { cmd.Tenant = key; return cmd }

func pushOf(items ...*command.PushItem) *command.Command {
	return &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}}
}

func popOf(q string) *command.Command {
	return &command.Command{Body: &command.Command_Pop{Pop: &command.Pop{Queue: q, Batch: 10, Partitions: 1, LeaseId: uuid.NewString()}}}
}

func kvOf(ops ...*command.KVOp) *command.Command {
	return &command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: ops}}}
}

func (h *harness) readAs(key string, fn func(r *Reader)) {
	h.t.Helper()
	if err := h.f.ReadAs(key, func(r *Reader) error { fn(r); return nil }); err != nil {
		h.t.Fatal(err)
	}
}

// The same queue and KV names in two tenants are two queues and two
// entries: each tenant's pops, acks, reads and markers see its own only.
func TestTenantsAreIsolated(t *testing.T) {
	h := newHarness(t)
	h.apply(pushOf(item("orders", "", "d1")))
	h.apply(as("acme", pushOf(item("orders", "", "a1"), item("orders", "", "a2"))))

	acme := h.apply(as("acme", popOf("orders"))).(*command.PopResult)
	eqList(t, "acme pops its own", h.txnsAs("acme", acme), []string{"a1", "a2"})
	def := h.apply(popOf("orders")).(*command.PopResult)
	eqList(t, "the default tenant pops its own", h.txnsAs("", def), []string{"d1"})
	none := h.apply(as("beta", popOf("orders"))).(*command.PopResult)
	eq(t, "a tenant with no such queue pops nothing", len(none.Messages), 0)

	// An ack naming acme's partition and lease, sent as another tenant,
	// finds nothing there and changes nothing of acme's.
	ack := &command.AckItem{TransactionId: "a1", PartitionId: acme.Messages[0].PartitionId, LeaseId: acme.LeaseId,
		Status: command.AckStatus_COMPLETED}
	res := h.apply(as("beta", &command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: []*command.AckItem{ack}}}})).(*command.AckResult)
	if res.Items[0].Success {
		t.Fatalf("another tenant's ack of acme's message went through: %v", res.Items[0])
	}
	res = h.apply(as("acme", &command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: []*command.AckItem{ack}}}})).(*command.AckResult)
	eq(t, "acme's own ack", res.Items[0].Success, true)

	// The exactly-once marker is per tenant.
	h.apply(as("acme", kvOf(marker("order-1", false))))
	h.readAs("acme", func(r *Reader) {
		got := r.KV(&command.KVOp{Kind: command.KVOp_GET, Ns: "charges", Key: "order-1"}, h.now)
		eq(t, "acme reads its marker", got.Found, true)
	})
	h.readAs("", func(r *Reader) {
		got := r.KV(&command.KVOp{Kind: command.KVOp_GET, Ns: "charges", Key: "order-1"}, h.now)
		eq(t, "the default tenant does not", got.Found, false)
	})
	h.readAs("beta", func(r *Reader) { eq(t, "beta lists no queue", len(r.Queues()), 0) })
	eqList(t, "tenants", h.f.Tenants(), []string{"default", "acme", "beta"})
}

func (h *harness) txnsAs(key string, pr *command.PopResult) []string {
	h.t.Helper()
	var out []string
	h.readAs(key, func(r *Reader) {
		for _, m := range pr.Messages {
			if rec := r.Message(m.PartitionId, m.Seq); rec != nil {
				out = append(out, rec.TransactionId)
			}
		}
	})
	return out
}

// Another tenant's message files survive a restart (they are not orphans
// of the default tenant's state), a replay and a snapshot restore give the
// same state, and the state hash covers every tenant.
func TestTenantsSurviveRestartReplayAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t)
	h.f = openFSM(t, dir, 1)
	h.db = h.f.db
	h.apply(as("acme", pushOf(item("q", "", "a1"))))
	h.apply(pushOf(item("q", "", "d1")))
	want := stateHash(t, h.f)

	// the same entries with acme's push to the default tenant instead
	other := newHarness(t)
	other.apply(pushOf(item("q", "", "a1")))
	other.apply(pushOf(item("q", "", "d1")))
	if stateHash(t, other.f) == want {
		t.Fatal("the state hash does not tell tenants apart")
	}

	if err := h.f.Flush(); err != nil {
		t.Fatal(err)
	}
	h.db.Close()
	h.f.msgs.Close()
	reopened := openFSM(t, dir, 1)
	eq(t, "state after a restart", stateHash(t, reopened), want)
	eqList(t, "tenants after a restart", reopened.Tenants(), []string{"default", "acme"})
	if err := reopened.ReadAs("acme", func(r *Reader) error {
		qs := r.Queues()
		eq(t, "acme's queue", len(qs), 1)
		parts := r.Partitions("q")
		eq(t, "acme's partition", len(parts), 1)
		recs, err := r.Messages(parts[0].Id, 1, 1)
		if err != nil || len(recs) != 1 {
			t.Fatalf("acme's message after a restart: %v %v", recs, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	image := snapshotOf(t, reopened)
	dst, _ := freshFSM(t)
	if err := dst.Restore(io.NopCloser(bytes.NewReader(image))); err != nil {
		t.Fatal(err)
	}
	eq(t, "state after a snapshot restore", stateHash(t, dst), want)
	eqList(t, "tenants after a snapshot restore", dst.Tenants(), []string{"default", "acme"})

	replica := newHarness(t)
	for _, l := range h.log {
		replica.f.Apply(l)
	}
	eq(t, "a replica that applied the same log", stateHash(t, replica.f), want)
}

// A command naming a tenant that is not a valid name (only a node's own bug
// could write one) is refused on every replica alike and writes nothing.
func TestInvalidTenantIsRefused(t *testing.T) {
	h := newHarness(t)
	before := stateHashWithoutMeta(t, h)
	for _, key := range []string{"default", "Bad Name", "*"} {
		res := h.f.Apply(h.entry(as(key, pushOf(item("q", "", "x")))))
		if r, ok := res.(*command.Response); !ok || r.InternalError == "" {
			t.Fatalf("tenant %q: %v", key, res)
		}
	}
	eq(t, "nothing written", stateHashWithoutMeta(t, h), before)
	eqList(t, "no tenant noted", h.f.Tenants(), []string{"default"})
}
