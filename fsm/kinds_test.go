package fsm

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
)

// everyBody makes one command of every arm of Command's body.
func everyBody(t *testing.T) []*command.Command {
	t.Helper()
	fields := (&command.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	var out []*command.Command
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		cmd := &command.Command{}
		m := cmd.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		out = append(out, cmd)
	}
	return out
}

// Every arm of Command's body has a kind, and every kind an arm
// (registry.go's recipe for adding a command); likewise every query.
func TestEveryCommandBodyHasAKind(t *testing.T) {
	cmds := everyBody(t)
	for _, cmd := range cmds {
		if KindOf(cmd) == nil {
			t.Errorf("command body %T has no kind: register it in registry.go", cmd.Body)
		}
	}
	if len(kinds) != len(cmds) {
		t.Errorf("%d kinds for %d command bodies", len(kinds), len(cmds))
	}
	qfields := (&command.Query{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	for i := 0; i < qfields.Len(); i++ {
		fd := qfields.Get(i)
		q := &command.Query{}
		m := q.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		if QueryKindOf(q) == nil {
			t.Errorf("query body %s has no kind: register it in queries.go", fd.Name())
		}
	}
	if len(queryKinds) != qfields.Len() {
		t.Errorf("%d query kinds for %d query bodies", len(queryKinds), qfields.Len())
	}
}

// A kind that lacks a fact does not register: the node would not start.
func TestAKindLackingAFactPanics(t *testing.T) {
	apply := func(*applyCtx, *command.Command) (proto.Message, bool) { return nil, true }
	touches := func(*command.Command, func(Touch)) {}
	whole := Kind{Name: "x", Apply: apply, Origin: FromClient, Access: readWrite, Touches: touches,
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused}
	if err := whole.check(); err != nil {
		t.Fatalf("a whole kind: %v", err)
	}
	for name, drop := range map[string]func(*Kind){
		"Name": func(k *Kind) { k.Name = "" }, "Apply": func(k *Kind) { k.Apply = nil },
		"Origin": func(k *Kind) { k.Origin = 0 }, "Access": func(k *Kind) { k.Access = nil },
		"Touches": func(k *Kind) { k.Touches = nil }, "WhenFull": func(k *Kind) { k.WhenFull = 0 },
		"Audit": func(k *Kind) { k.Audit = nil }, "Payloads": func(k *Kind) { k.Payloads = nil },
		"Refusal": func(k *Kind) { k.Refusal = nil },
		// a node's own kind names no caller's access
		"a node's kind with Access": func(k *Kind) { k.Origin = FromNode },
	} {
		k := whole
		drop(&k)
		if k.check() == nil {
			t.Errorf("a kind without %s passes the check", name)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering a kind without %s did not panic", name)
				}
			}()
			register(&struct{ command.Command_Noop }{}, k)
		}()
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "twice") {
				t.Errorf("registering a kind twice: %v", r)
			}
		}()
		register(&command.Command_Push{}, whole)
	}()
}

// The facts of every kind, as the issue and the spec state them (not as
// the registry says): who proposes it, who may run it, what admission does
// on a full disk, what is audited, what carries payloads, what is refused
// before an entry.
func TestTheFactsOfEveryKind(t *testing.T) {
	fromNode := []string{"noop", "sweep", "retain", "idempotency_record", "fire_timers", "drain_buffer", "audit_note", "state_check", "index_dead_letters"}
	admins := []string{"delete_queue", "delete_group", "set_switches", "purge_dead_letters", "stream_delete_query"}
	addsData := []string{"push", "transaction", "kv", "timers", "configure", "locks", "stream_register", "stream_cycle", "kafka_produce", "kafka_create_topics"}
	audited := []string{"delete_queue", "delete_group", "seek", "set_subscription", "set_switches", "audit_note",
		"replay_dead_letter", "purge_dead_letters", "delete_message", "stream_delete_query", "place_tenant"}
	payloads := []string{"push", "transaction", "timers", "stream_cycle", "kafka_produce"}
	refusals := []string{"kv", "locks", "timers", "transaction", "seek", "stream_delete_query", "stream_register"}
	for _, cmd := range everyBody(t) {
		k := KindOf(cmd)
		if got, want := k.Origin == FromNode, slices.Contains(fromNode, k.Name); got != want {
			t.Errorf("%s: from the node %v, want %v", k.Name, got, want)
		}
		if k.Origin == FromClient {
			a := k.Access(cmd)
			want := auth.ReadWrite
			if slices.Contains(admins, k.Name) {
				want = auth.Admin
			}
			if k.Name == "set_switches" || k.Name == "place_tenant" {
				want = auth.Operator // the switches are every tenant's (issue 26)
			}
			if a.Level != want {
				t.Errorf("%s: level %d, want %d", k.Name, a.Level, want)
			}
			if a.Producer != slices.Contains([]string{"push", "timers", "kafka_produce", "kafka_init_producer"}, k.Name) {
				t.Errorf("%s: producer %v", k.Name, a.Producer)
			}
		}
		if got, want := k.WhenFull == RefusedWhenFull, slices.Contains(addsData, k.Name); got != want {
			t.Errorf("%s: refused when full %v, want %v", k.Name, got, want)
		}
		if got, want := k.Refuses(), slices.Contains(refusals, k.Name); got != want {
			t.Errorf("%s: refuses before an entry %v, want %v", k.Name, got, want)
		}
		if n := cmd.GetAuditNote(); n != nil {
			n.Action = "remove_voter"
		}
		if p := cmd.GetPlaceTenant(); p != nil {
			p.Pin = true // an operator's pin is audited; a tenant's first write is not
		}
		if action, _ := k.Audit(cmd); (action != "") != slices.Contains(audited, k.Name) {
			t.Errorf("%s: audited as %q", k.Name, action)
		}
	}
	// The kinds that carry payloads visit them; a push's items, a timer
	// batch's schedules.
	for _, cmd := range []*command.Command{
		{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{{Queue: "q"}}}}},
		{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: []*command.TimerOp{{Queue: "q"}}}}},
		{Body: &command.Command_Transaction{Transaction: &command.Transaction{Ops: []*command.TxnOp{
			{Op: &command.TxnOp_Push{Push: &command.PushItem{Queue: "q"}}}}}}},
	} {
		n := 0
		EachPayload(cmd, func(*command.PushItem) { n++ }, func(*command.TimerOp) { n++ })
		if k := KindOf(cmd); n != 1 || !slices.Contains(payloads, k.Name) {
			t.Errorf("%s: %d payloads", k.Name, n)
		}
	}
}

// What a transaction touches is every rider's name: the queue of each
// push, the partition of each ack, each KV namespace, the queue of each
// timer and of each position (issue 21: timers and positions were
// forgotten). A timer cancel by a write-only token needs more than a
// producer's role.
func TestATransactionTouchesEveryRider(t *testing.T) {
	pid := []byte("0123456789abcdef")
	cmd := &command.Command{Body: &command.Command_Transaction{Transaction: &command.Transaction{
		Ops: []*command.TxnOp{
			{Op: &command.TxnOp_Push{Push: &command.PushItem{Queue: "pushed"}}},
			{Op: &command.TxnOp_Ack{Ack: &command.AckItem{PartitionId: pid}}},
		},
		Kv:        []*command.KVOp{{Ns: "marks"}, {Ns: locks.Namespace}},
		Timers:    []*command.TimerOp{{Queue: "timed"}, {Kind: command.TimerOp_CANCEL, Queue: "cancelled"}},
		Positions: []*command.PositionOp{{Queue: "moved", ConsumerGroup: "billing"}},
	}}}
	var got []string
	KindOf(cmd).Touches(cmd, func(t Touch) { got = append(got, t.String()) })
	want := []string{Queue("pushed").String(), Partition(pid).String(), Namespace("marks").String(),
		Namespace(locks.Namespace).String(), Queue("timed").String(), Queue("cancelled").String(), Queue("moved").String()}
	if !slices.Equal(got, want) {
		t.Fatalf("touches %v, want %v", got, want)
	}
	var pushes, timers int
	KindOf(cmd).Payloads(cmd, func(*command.PushItem) { pushes++ }, func(*command.TimerOp) { timers++ })
	if pushes != 1 || timers != 1 {
		t.Fatalf("payloads: %d pushes, %d timers (a cancel carries none)", pushes, timers)
	}
	cancel := &command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: []*command.TimerOp{
		{Queue: "q"}, {Kind: command.TimerOp_CANCEL, Queue: "q"}}}}}
	if KindOf(cancel).Access(cancel).Producer {
		t.Fatal("a write-only token may cancel a timer")
	}
}
