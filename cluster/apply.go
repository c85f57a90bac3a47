package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// Forwarder reaches the leader's node over the internal service (grpcapi).
// Each call runs on the leader only: a node that is no longer the leader
// answers ErrNotLeader, having done nothing.
type Forwarder interface {
	Apply(ctx context.Context, addr string, cmd *command.Command) (proto.Message, error)
	Pop(ctx context.Context, addr string, in *command.Pop, wait time.Duration) (*command.PopResult, error)
	ReadIndex(ctx context.Context, addr string) (uint64, error)
	Query(ctx context.Context, addr string, q *command.Query) (*command.QueryResult, error)
	RemoveServer(ctx context.Context, addr, id, actor string) error
}

// SetForwarder installs the client used to reach the leader.
func (n *Node) SetForwarder(f Forwarder) { n.fwd = f }

// leaderWait bounds how long a request waits for an election to finish.
const leaderWait = 5 * time.Second

// How a forwarded call may be ended when the leader changes under it.
type forwardKind int

const (
	// forwardWrite: a write forwarded to a leader that was replaced (or
	// lost) while the call waited ends at once with ErrOutcomeUnknown (the
	// old leader may have appended it, and it may yet commit), instead of
	// waiting out the forward's deadline on a leader that may never answer
	// (a deaf one).
	forwardWrite forwardKind = iota
	// forwardRead: a read is asked again of the new leader.
	forwardRead
)

// route runs local when this node leads and remote against the leader
// otherwise: the one forwarding path every front end uses. While there is
// no leader it waits (up to leaderWait and the caller's deadline); a target
// that turns out not to lead did nothing, so route tries the new leader.
// The ctx remote gets ends when this node sees the leader change (kind
// says what then).
func route[T any](n *Node, ctx context.Context, kind forwardKind, local func() (T, error), remote func(ctx context.Context, addr string) (T, error)) (T, error) {
	var zero T
	deadline := time.Now().Add(leaderWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	for {
		var err error
		var v T
		if n.raft.State() == raft.Leader {
			v, err = local()
		} else if id, addr := n.leaderForwardAddr(); addr != "" && n.fwd != nil {
			var moved bool
			v, moved, err = forwardInEpoch(n, ctx, id, addr, remote)
			switch {
			case moved && kind == forwardWrite:
				return zero, fmt.Errorf("%w: the leader changed while the write was forwarded to it", ErrOutcomeUnknown)
			case moved:
				err = ErrNotLeader // ask the new one
			}
		} else {
			err = n.notLeader()
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) {
			return v, err
		}
		if time.Now().After(deadline) {
			return zero, err
		}
		select {
		case <-ctx.Done():
			return zero, ErrTimeout
		case <-n.stop:
			return zero, ErrShutdown
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// forwardInEpoch runs remote with a ctx that also ends when this node
// sees the leader change; moved reports that remote failed because it did
// (the epoch ended it, not the caller, not an answer of the leader's).
func forwardInEpoch[T any](n *Node, ctx context.Context, leader, addr string, remote func(ctx context.Context, addr string) (T, error)) (v T, moved bool, err error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(n.leaders.of(leader), cancel)
	defer stop()
	v, err = remote(fctx, addr)
	return v, err != nil && fctx.Err() != nil && ctx.Err() == nil, err
}

// leaderForwardAddr is the leader's id and forwarding address, from gossip.
func (n *Node) leaderForwardAddr() (id, addr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" || n.members == nil {
		return "", ""
	}
	if m, ok := n.members.byID(string(lid)); ok {
		return string(lid), m.GRPC
	}
	return "", ""
}

// Apply turns cmd into one log entry, on the leader, and returns the FSM's
// result for that entry (never "index N committed").
func (n *Node) Apply(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	stampTenant(ctx, cmd)
	if res := n.refused(cmd); res != nil {
		return res, nil
	}
	release, err := n.admit(cmd)
	if err != nil {
		return nil, err
	}
	defer release()
	return route(n, ctx, forwardWrite,
		func() (proto.Message, error) { return n.applyLocal(ctx, cmd) },
		func(ctx context.Context, addr string) (proto.Message, error) { return n.fwd.Apply(ctx, addr, cmd) })
}

// refused is the answer this node's state already gives cmd without an
// entry (fsm.Reader.Refused: a switch is off for it, a seek names nothing),
// or nil. It reads the local state: a follower a moment behind may refuse
// a call the leader would have let through a little earlier than it
// would, never one the switches let through for good.
func (n *Node) refused(cmd *command.Command) proto.Message {
	if k := fsm.KindOf(cmd); k == nil || !k.Refuses() {
		return nil
	}
	var res proto.Message
	n.fsm.ReadAs(cmd.Tenant, func(r *fsm.Reader) error {
		res = r.Refused(cmd)
		return nil
	})
	return res
}

// ApplyLocal applies cmd if this node leads, else answers ErrNotLeader: the
// forwarding service's entry point, so a forwarded command never hops twice.
func (n *Node) ApplyLocal(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	release, err := n.admit(cmd)
	if err != nil {
		return nil, err
	}
	defer release()
	return n.applyLocal(ctx, cmd)
}

func (n *Node) notLeader() error {
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return ErrNoLeader
	}
	return ErrNotLeader
}

func (n *Node) applyLocal(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	select {
	case <-n.stop:
		return nil, ErrShutdown
	default:
	}
	done, err := n.inflight.Begin(cmd.GetIdempotency().GetKey())
	if err != nil {
		return nil, err
	}
	defer done()
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, ErrTimeout
	}
	stampTenant(ctx, cmd)
	if !fsm.Applies(cmd) { // a forwarded command of a newer node, or a malformed one
		return nil, fmt.Errorf("%w: a command of a kind this node does not apply (%T)", ErrInternal, cmd.Body)
	}
	if err := n.seal(cmd); err != nil {
		return nil, err
	}
	cmd.StampUs = n.clock.next(n.fsm.LastNow())
	data, err := command.Encode(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode command: %w", err)
	}
	start := time.Now()
	var f raft.ApplyFuture
	for {
		f = n.raft.Apply(data, time.Until(start.Add(timeout)))
		if ctx.Done() != nil {
			done := make(chan struct{})
			go func() { f.Error(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				n.m.applyErrors.WithLabelValues("outcome_unknown").Inc()
				return nil, ErrOutcomeUnknown
			}
		}
		if !errors.Is(f.Error(), raft.ErrLeadershipTransferInProgress) {
			break
		}
		// Leadership is moving (balance.go, a stop): nothing entered the
		// log. Propose again once it has moved (ErrNotLeader: route takes
		// the call to the new leader) or stayed.
		if err := n.awaitTransfer(ctx, start.Add(timeout)); err != nil {
			return nil, err
		}
	}
	if err := f.Error(); err != nil {
		mapped := mapRaftError(err)
		n.m.applyErrors.WithLabelValues(errLabel(mapped)).Inc()
		return nil, mapped
	}
	n.m.applySeconds.Observe(time.Since(start).Seconds())
	switch r := f.Response().(type) {
	case *command.Response:
		if r.InternalError != "" {
			return nil, fmt.Errorf("%w: %s", ErrInternal, r.InternalError)
		}
		return r, nil
	case proto.Message:
		return r, nil
	case nil:
		return nil, fmt.Errorf("%w: entry %d had no result", ErrInternal, f.Index())
	default:
		return nil, fmt.Errorf("%w: unexpected result %T", ErrInternal, r)
	}
}

// mapRaftError says whether a failed apply may still have committed.
func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader // refused before it entered the log
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrOutcomeUnknown
	default: // ErrLeadershipLost and anything else after proposal
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
}

func errLabel(err error) string {
	switch {
	case errors.Is(err, ErrNotLeader):
		return "not_leader"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrOutcomeUnknown):
		return "outcome_unknown"
	}
	return "other"
}

// ReadLevel is how fresh a read must be.
type ReadLevel int

const (
	// Linearizable reads reflect every write acknowledged before the read
	// started: the leader confirms it still leads and returns its commit
	// index, and the node serving the read waits until it has applied that
	// index (Raft §6.4, etcd's ReadIndex). A follower hands a query to the
	// leader (Query) and serves any other read from its own state after
	// asking the leader for the index (Read): it learns that the index is
	// committed only with the leader's next append, up to CommitTimeout
	// later when no writes flow.
	Linearizable ReadLevel = iota
	// Stale reads answer from this node's state as it is.
	Stale
)

// Read runs fn over a consistent view of the state at the given level.
func (n *Node) Read(ctx context.Context, level ReadLevel, fn func(*fsm.Reader) error) error {
	if level == Linearizable {
		index, err := route(n, ctx, forwardRead,
			func() (uint64, error) { return n.ReadIndex(ctx) },
			func(ctx context.Context, addr string) (uint64, error) { return n.fwd.ReadIndex(ctx, addr) })
		if err != nil {
			return err
		}
		if err := n.waitApplied(ctx, index); err != nil {
			return err
		}
	}
	return n.fsm.ReadAs(tenantKey(ctx), fn)
}

// Query answers q at the given level: stale from this node's state,
// linearizable from the leader's (a follower forwards it), after the
// leader has confirmed it leads and applied its commit index.
func (n *Node) Query(ctx context.Context, level ReadLevel, q *command.Query) (*command.QueryResult, error) {
	if level == Stale {
		return n.answer(ctx, q)
	}
	return route(n, ctx, forwardRead,
		func() (*command.QueryResult, error) { return n.QueryLocal(ctx, q) },
		func(ctx context.Context, addr string) (*command.QueryResult, error) { return n.fwd.Query(ctx, addr, q) })
}

// QueryLocal answers a linearizable query if this node leads, else
// ErrNotLeader: the forwarding service's entry point.
func (n *Node) QueryLocal(ctx context.Context, q *command.Query) (*command.QueryResult, error) {
	index, err := n.ReadIndex(ctx)
	if err != nil {
		return nil, err
	}
	if err := n.waitApplied(ctx, index); err != nil {
		return nil, err
	}
	return n.answer(ctx, q)
}

func (n *Node) answer(ctx context.Context, q *command.Query) (*command.QueryResult, error) {
	var res *command.QueryResult
	err := n.fsm.ReadAs(tenantKey(ctx), func(rd *fsm.Reader) error {
		var err error
		res, err = rd.Answer(q, n.Now())
		return err
	})
	return res, err
}

// Settle waits until every entry this leader has appended is committed and
// applied (a Raft barrier): after it, a write that ended with
// ErrOutcomeUnknown on this node either has been applied or never will be.
// ErrNotLeader when this node does not lead; a new leader settles the log
// itself before it serves a linearizable read (leaderLoop's barrier).
func (n *Node) Settle(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := n.raft.Barrier(timeout).Error(); err != nil {
		return mapRaftError(err)
	}
	return nil
}

// ReadIndex returns the index a linearizable read must wait for: after the
// leader has applied every entry of earlier terms, its commit index, once
// it has confirmed with a quorum that it still leads.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if n.raft.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	for !n.ready.Load() {
		select {
		case <-ctx.Done():
			return 0, ErrTimeout
		case <-n.stop:
			return 0, ErrShutdown
		case <-time.After(5 * time.Millisecond):
		}
		if n.raft.State() != raft.Leader {
			return 0, ErrNotLeader
		}
	}
	index := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, ErrNotLeader
	}
	return n.lastStateIndex(index), nil
}

// lastStateIndex walks back from index over entries that never reach the
// FSM (no-ops, barriers) to the last one that does. A read must wait for
// the FSM to have applied that entry: Raft's own applied index is advanced
// when entries are handed to the FSM, not when the FSM is done with them,
// and the FSM's applied index never reaches an index that holds a no-op.
func (n *Node) lastStateIndex(index uint64) uint64 {
	for i := index; i > 0; i-- {
		var l raft.Log
		if err := n.stores.Log.GetLog(i, &l); err != nil {
			return i // compacted away: covered by the snapshot the FSM holds
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return 0
}

// awaitTransfer waits a moment for a leadership transfer of this node to
// end, up to deadline: ErrNotLeader once it no longer leads (the call goes
// to the new leader), nil to propose again.
func (n *Node) awaitTransfer(ctx context.Context, deadline time.Time) error {
	select {
	case <-ctx.Done():
		return ErrTimeout
	case <-n.stop:
		return ErrShutdown
	case <-time.After(5 * time.Millisecond):
	}
	switch {
	case n.raft.State() != raft.Leader:
		return ErrNotLeader
	case time.Now().After(deadline):
		return ErrTimeout
	}
	return nil
}
