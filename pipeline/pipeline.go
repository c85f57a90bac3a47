package pipeline

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/request"
)

// Node is what the pipeline needs of a node; *cluster.Node is one (each
// call forwards to the leader on a follower).
type Node interface {
	Apply(ctx context.Context, cmd *command.Command) (proto.Message, error)
	Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error)
	Query(ctx context.Context, level cluster.ReadLevel, q *command.Query) (*command.QueryResult, error)
	// PartitionQueue and LeaseQueues resolve the names a scope check
	// needs; false = unknown (refused to a scoped token).
	PartitionQueue(ctx context.Context, pid []byte) (string, bool)
	LeaseQueues(ctx context.Context, leaseID string) ([]string, bool)
}

// DefaultTimeout bounds a write's wait for its entry when Config leaves it 0.
const DefaultTimeout = 10 * time.Second

// Config configures a pipeline.
type Config struct {
	Node    Node
	Timeout time.Duration // a write's wait for its entry; 0 = DefaultTimeout
	Logger  *slog.Logger  // where audit lines go; nil = slog.Default()
	Front   string        // the front end's name in audit lines: "http", "grpc"
}

// Pipeline is one front end's way to the node.
type Pipeline struct {
	node    Node
	timeout time.Duration
	log     *slog.Logger
	front   string
}

// New builds a pipeline.
func New(cfg Config) *Pipeline {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pipeline{node: cfg.Node, timeout: cfg.Timeout, log: cfg.Logger, front: cfg.Front}
}

// Call is what a front end knows of one call beyond its command.
type Call struct {
	Idem   *command.Idempotency // the Idempotency-Key; nil = none
	Remote string               // the client's address, for the audit line
}

// Write runs cmd for the caller of ctx as one entry: authorises it,
// stamps it, applies it under the call's key within the write timeout,
// and returns its result, or the result the key stored first (replayed).
// A refusal the key stored first is returned as the error it was.
func (p *Pipeline) Write(ctx context.Context, call Call, cmd *command.Command) (res proto.Message, replayed bool, err error) {
	k, err := p.authorize(ctx, cmd)
	if err != nil {
		return nil, false, err
	}
	stamp(ctx, k, cmd)
	return p.apply(ctx, call, k, cmd)
}

// Refuse answers a refusal of the request rules (err): with a key, it is
// stored under the key first, so that a retry gets the same answer, unless
// the key already has an outcome, which is then the answer. It returns
// the error to answer with, and whether it is the key's replay.
func (p *Pipeline) Refuse(ctx context.Context, call Call, err error) (answer error, replayed bool) {
	e := request.FromError(err)
	if call.Idem == nil || !e.Storable() {
		return e, false
	}
	cmd := idempotency.Refused(call.Idem, e.Refusal())
	if id := auth.IdentityFrom(ctx); id != nil {
		cmd.Actor = id.Sub
	}
	res, replayed, aerr := p.apply(ctx, call, fsm.KindOf(cmd), cmd)
	if aerr != nil {
		return aerr, false
	}
	if stored, ok := res.(*command.Refusal); ok {
		e = request.FromRefusal(stored)
	}
	return e, replayed
}

// apply proposes cmd with the call's key and maps its outcome.
func (p *Pipeline) apply(ctx context.Context, call Call, k *fsm.Kind, cmd *command.Command) (proto.Message, bool, error) {
	cmd.Idempotency = call.Idem
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.node.Apply(ctx, cmd)
	if err != nil {
		return nil, false, err
	}
	if action, detail := k.Audit(cmd); action != "" {
		p.AuditLine(ctx, call, action, detail)
	}
	out, replayed, err := idempotency.Outcome(call.Idem, res)
	if err != nil {
		return nil, false, err
	}
	if refusal, ok := out.(*command.Refusal); ok && cmd.GetIdempotencyRecord() == nil {
		return nil, replayed, request.FromRefusal(refusal)
	}
	return out, replayed, nil
}

// AuditLine writes the node log's line of an audited operation the caller
// of ctx made (its record in the trail is written by apply).
func (p *Pipeline) AuditLine(ctx context.Context, call Call, action, detail string) {
	actor := ""
	if id := auth.IdentityFrom(ctx); id != nil {
		actor = id.Sub
	}
	p.log.Info("audit", "action", action, "actor", actor, "detail", detail, "remote", call.Remote, "front", p.front)
}

// stamp marks cmd with its caller: the actor the audit trail records, and
// producerSub on every message the command will append: push items, a
// transaction's pushes, timers, standalone or a transaction's (spec §4.17:
// a producerSub in the body is never taken). With JWT off it does nothing.
func stamp(ctx context.Context, k *fsm.Kind, cmd *command.Command) {
	id := auth.IdentityFrom(ctx)
	if id == nil {
		return
	}
	cmd.Actor = id.Sub
	if !k.Carries() {
		return
	}
	k.Payloads(cmd, func(it *command.PushItem) { it.ProducerSub = id.Sub }, func(op *command.TimerOp) { op.ProducerSub = id.Sub })
}

// Pop claims messages for the caller of ctx, long-polling up to wait.
func (p *Pipeline) Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	if err := p.Authorize(ctx, &command.Command{Body: &command.Command_Pop{Pop: in}}); err != nil {
		return nil, err
	}
	return p.node.Pop(ctx, in, wait)
}

// Query runs a read query the caller of ctx may run.
func (p *Pipeline) Query(ctx context.Context, level cluster.ReadLevel, q *command.Query) (*command.QueryResult, error) {
	k := fsm.QueryKindOf(q)
	if k == nil {
		return nil, &request.Error{Kind: request.Internal, Msg: "a query of a kind this node does not know"}
	}
	if id := auth.IdentityFrom(ctx); id != nil {
		if !id.Allows(k.Access.Level, k.Access.Producer) || id.Scoped() && !p.reaches(ctx, id, func(touch func(fsm.Touch)) { k.Reads(q, touch) }) {
			return nil, ErrForbidden
		}
	}
	return p.node.Query(ctx, level, q)
}
