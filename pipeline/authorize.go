package pipeline

import (
	"context"
	"fmt"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/request"
)

// ErrForbidden is a command the caller's token does not reach: its role
// is below what the command needs, or it is scoped and the command touches
// a queue or namespace outside the scope (or names it cannot list, or
// spans every queue). 403 "Insufficient permissions"; nothing is written.
var ErrForbidden = &request.Error{Kind: request.Forbidden, Msg: auth.ErrInsufficient.Msg}

// Authorize reports whether the caller of ctx may run cmd: nil, or why
// not (ErrForbidden, or an internal error for a command no front end may
// propose).
func (p *Pipeline) Authorize(ctx context.Context, cmd *command.Command) error {
	_, err := p.authorize(ctx, cmd)
	return err
}

func (p *Pipeline) authorize(ctx context.Context, cmd *command.Command) (*fsm.Kind, error) {
	k := fsm.KindOf(cmd)
	switch {
	case k == nil:
		return nil, &request.Error{Kind: request.Internal, Msg: fmt.Sprintf("a command of a kind this node does not know (%T)", cmd.Body)}
	case k.Origin != fsm.FromClient:
		return nil, &request.Error{Kind: request.Internal, Msg: "a command of kind " + k.Name + " is the node's own: no front end proposes it"}
	}
	id := auth.IdentityFrom(ctx)
	if id == nil {
		return k, nil // JWT off
	}
	if a := k.Access(cmd); !id.Allows(a.Level, a.Producer) {
		return nil, ErrForbidden
	}
	if id.Scoped() && !p.reaches(ctx, id, func(touch func(fsm.Touch)) { k.Touches(cmd, touch) }) {
		return nil, ErrForbidden
	}
	return k, nil
}

// reaches reports whether a scoped identity reaches every name touches
// lists. A name it cannot resolve, an empty one, or "every queue" is
// refused: a scope check says yes only to what it could name.
func (p *Pipeline) reaches(ctx context.Context, id *auth.Identity, touches func(func(fsm.Touch))) bool {
	ok := true
	touches(func(t fsm.Touch) {
		if ok {
			ok = p.reachesOne(ctx, id, t)
		}
	})
	return ok
}

func (p *Pipeline) reachesOne(ctx context.Context, id *auth.Identity, t fsm.Touch) bool {
	switch t.What {
	case fsm.TouchQueue, fsm.TouchNamespace:
		return t.Name != "" && id.Touches(t.Name)
	case fsm.TouchPartition:
		q, found := p.node.PartitionQueue(ctx, t.ID)
		return found && id.Touches(q)
	case fsm.TouchLease:
		qs, found := p.node.LeaseQueues(ctx, t.Name)
		for _, q := range qs {
			found = found && id.Touches(q)
		}
		return found
	}
	return false // every queue
}
