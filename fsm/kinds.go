package fsm

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
)

// A Kind is everything the node knows about one kind of command, in one
// place (registry.go registers every kind; Consul's registerCommand is the
// shape). The front ends' write path (package pipeline) reads Origin,
// Access and Touches; the node reads WhenFull, Refusal and Payloads before
// it proposes; apply reads Apply, Audit and Payloads. Nothing else switches
// on a command's body.
//
// Every field is required: a kind that has no refusal, no payloads or no
// audit record says so with neverRefused, noPayloads or notAudited, so
// that a kind added without thinking about one of them panics at start
// (register) instead of being let through.
type Kind struct {
	// Name labels the kind's apply metric and its log lines.
	Name string
	// Apply applies the command; keep=false discards every write of it
	// (all or nothing).
	Apply func(c *applyCtx, cmd *command.Command) (res proto.Message, keep bool)
	// Origin says who may propose it.
	Origin Origin
	// Access is what a caller needs to run the command (FromClient kinds;
	// nil for FromNode ones, which no caller runs).
	Access func(cmd *command.Command) Access
	// Touches calls touch for every queue, partition, lease and KV
	// namespace the command touches, its riders included (FromClient
	// kinds; nil for FromNode ones). A command that spans every queue
	// says so with EveryQueue.
	Touches func(cmd *command.Command, touch func(Touch))
	// WhenFull says whether the command is refused while the data disk is
	// nearly full (it adds data) or admitted (it frees space, or little).
	WhenFull WhenFull
	// Audit names the command's audit record (action and detail), or ""
	// when the command is not audited (notAudited).
	Audit func(cmd *command.Command) (action, detail string)
	// Payloads calls push for every message the command appends and timer
	// for every timer it schedules: what sealing at rest encrypts, what
	// producerSub is stamped on, whose keys apply notes (noPayloads).
	Payloads func(cmd *command.Command, push func(*command.PushItem), timer func(*command.TimerOp))
	// Refusal is the answer the state already gives the command without
	// an entry (an operator switch is off for it, it names nothing), or nil
	// (neverRefused: the kind is always proposed). The node asks before it
	// proposes; apply asks again of the state it meets.
	Refusal func(rd *Reader, cmd *command.Command) proto.Message

	refuses bool // Refusal is not neverRefused: worth a read before proposing
	carries bool // Payloads is not noPayloads
}

// Origin is who may propose a kind of command.
type Origin uint8

const (
	_ Origin = iota
	// FromClient kinds are what a front end builds from a request.
	FromClient
	// FromNode kinds are proposed only by the node itself (sweeps,
	// retention, timer fires, buffer drains, idempotency records of
	// refusals, audit notes, no-ops); every front end refuses them.
	FromNode
)

// Access is what a caller needs to run a command: a role of at least
// Level, or, where Producer is set, a write-only (producer) token.
type Access struct {
	Level    auth.Level
	Producer bool
}

// WhenFull is what storage-full admission does with a kind.
type WhenFull uint8

const (
	_ WhenFull = iota
	// RefusedWhenFull: the command can make the state bigger (messages,
	// KV entries, timers, queues).
	RefusedWhenFull
	// AdmittedWhenFull: pops, acks, seeks and deletions write little or
	// free space, and a consumer must be able to drain a full node.
	AdmittedWhenFull
)

// A Touch is one thing a command or a query touches.
type Touch struct {
	What TouchWhat
	Name string // a queue, namespace or lease id
	ID   []byte // a partition id
}

// TouchWhat is the kind of name a Touch carries.
type TouchWhat uint8

const (
	_ TouchWhat = iota
	TouchQueue
	TouchNamespace
	TouchPartition // by id: its queue decides
	TouchLease     // by id: the queues of the partitions it holds decide
	// TouchEveryQueue: the command spans every queue (a namespace pop, a
	// group's subscription everywhere, the operator's switches).
	TouchEveryQueue
)

// The Touch values handlers' Touches functions give.
func Queue(name string) Touch           { return Touch{What: TouchQueue, Name: name} }
func Namespace(name string) Touch       { return Touch{What: TouchNamespace, Name: name} }
func Partition(id []byte) Touch         { return Touch{What: TouchPartition, ID: id} }
func Lease(id string) Touch             { return Touch{What: TouchLease, Name: id} }
func EveryQueue() Touch                 { return Touch{What: TouchEveryQueue} }
func (t Touch) String() string          { return fmt.Sprintf("%d:%s%x", t.What, t.Name, t.ID) }
func readWrite(*command.Command) Access { return Access{Level: auth.ReadWrite} }
func admin(*command.Command) Access     { return Access{Level: auth.Admin} }
func operator(*command.Command) Access  { return Access{Level: auth.Operator} }

// The explicit "none" of the optional facts.
func notAudited(*command.Command) (string, string)                                 { return "", "" }
func noPayloads(*command.Command, func(*command.PushItem), func(*command.TimerOp)) {}
func neverRefused(*Reader, *command.Command) proto.Message                         { return nil }

// kinds maps a command body's type to its kind.
var kinds = map[reflect.Type]*Kind{}

// register adds the kind of commands whose body is of body's type; a kind
// registered twice, or one that lacks a fact, panics at start.
func register(body any, k Kind) {
	key := reflect.TypeOf(body)
	if _, dup := kinds[key]; dup {
		panic("fsm: kind registered twice: " + key.String())
	}
	if err := k.check(); err != nil {
		panic(fmt.Sprintf("fsm: kind %s (%s): %v", k.Name, key, err))
	}
	k.refuses = reflect.ValueOf(k.Refusal).Pointer() != reflect.ValueOf(neverRefused).Pointer()
	k.carries = reflect.ValueOf(k.Payloads).Pointer() != reflect.ValueOf(noPayloads).Pointer()
	kinds[key] = &k
}

// check reports the first fact k lacks.
func (k *Kind) check() error {
	switch {
	case k.Name == "":
		return fmt.Errorf("no Name")
	case k.Apply == nil:
		return fmt.Errorf("no Apply")
	case k.Origin != FromClient && k.Origin != FromNode:
		return fmt.Errorf("no Origin")
	case k.Origin == FromClient && (k.Access == nil || k.Touches == nil):
		return fmt.Errorf("a client's kind needs Access and Touches")
	case k.Origin == FromNode && (k.Access != nil || k.Touches != nil):
		return fmt.Errorf("a node's own kind has no Access or Touches: no caller runs it")
	case k.WhenFull != RefusedWhenFull && k.WhenFull != AdmittedWhenFull:
		return fmt.Errorf("no WhenFull")
	case k.Audit == nil:
		return fmt.Errorf("no Audit (notAudited says none)")
	case k.Payloads == nil:
		return fmt.Errorf("no Payloads (noPayloads says none)")
	case k.Refusal == nil:
		return fmt.Errorf("no Refusal (neverRefused says none)")
	}
	return nil
}

// KindOf is cmd's kind, or nil for a body this node does not know.
func KindOf(cmd *command.Command) *Kind {
	if cmd == nil || cmd.Body == nil {
		return nil
	}
	return kinds[reflect.TypeOf(cmd.Body)]
}

// Kinds is how many kinds of command this FSM applies.
func Kinds() int { return len(kinds) }

// Applies reports whether this FSM applies cmd (or may skip it): a command
// with no body it knows would stop every replica that meets it, so it must
// never enter the log.
func Applies(cmd *command.Command) bool { return KindOf(cmd) != nil || cmd.Skippable }

// Refuses reports whether the kind has a refusal worth asking the state
// for before proposing.
func (k *Kind) Refuses() bool { return k.refuses }

// Carries reports whether the kind's commands may carry payloads (its
// Payloads is not noPayloads), so that the paths that look at payloads
// skip the others without a call.
func (k *Kind) Carries() bool { return k.carries }

// EachPayload calls push and timer for every payload of cmd (nothing for
// a command of a kind this node does not know).
func EachPayload(cmd *command.Command, push func(*command.PushItem), timer func(*command.TimerOp)) {
	if k := KindOf(cmd); k != nil && k.carries {
		k.Payloads(cmd, push, timer)
	}
}
