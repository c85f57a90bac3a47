package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/backup"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

// What the front ends call (httpapi.Backend, grpcapi.Node, pipeline.Node):
// a tenant's call goes to its group's Node (For); what is the node's is
// group 0's (its id, /health's raft object, the cluster view) or every
// group's (readiness, removing a voter, draining the push buffers).

func (gs *Groups) Apply(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	if p := cmd.GetPlaceTenant(); p != nil { // an operator's pin: the table is group 0's
		if int(p.Group) >= len(gs.nodes) {
			return &command.PlaceTenantResult{Error: fmt.Sprintf("group %d: this cluster runs groups 0 to %d", p.Group, len(gs.nodes)-1)}, nil
		}
		return gs.nodes[0].Apply(tenant.With(ctx, tenant.Default), cmd)
	}
	if cmd.GetSetSwitches() != nil && len(gs.nodes) > 1 {
		return gs.everyGroup(ctx, cmd)
	}
	n, err := gs.writeTo(ctx)
	if err != nil {
		return nil, err
	}
	return n.Apply(ctx, cmd)
}

// everyGroup applies an operator's switch (maintenance, KV, timers) in
// every group, each its own entry: the switches are the node's, whatever
// group a tenant is in. It answers group 0's result; an error of any
// group is the answer (the operator's retry sets the same switch again).
func (gs *Groups) everyGroup(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	var first proto.Message
	var errs []error
	for g, n := range gs.nodes {
		res, err := n.Apply(WithGroup(ctx, g), proto.Clone(cmd).(*command.Command))
		if err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g, err))
			continue
		}
		if g == 0 {
			first = res
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return first, nil
}

func (gs *Groups) Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	n, err := gs.writeTo(ctx) // a pop writes (a lease, a group's first contact)
	if err != nil {
		return nil, err
	}
	return n.Pop(ctx, in, wait)
}

func (gs *Groups) Read(ctx context.Context, level ReadLevel, fn func(*fsm.Reader) error) error {
	return gs.For(ctx).Read(ctx, level, fn)
}

func (gs *Groups) Query(ctx context.Context, level ReadLevel, q *command.Query) (*command.QueryResult, error) {
	return gs.For(ctx).Query(ctx, level, q)
}

func (gs *Groups) PartitionQueue(ctx context.Context, pid []byte) (string, bool) {
	return gs.For(ctx).PartitionQueue(ctx, pid)
}

func (gs *Groups) LeaseQueues(ctx context.Context, leaseID string) ([]string, bool) {
	return gs.For(ctx).LeaseQueues(ctx, leaseID)
}

func (gs *Groups) Watch(ctx context.Context, queue string) <-chan struct{} {
	return gs.For(ctx).Watch(ctx, queue)
}

// The forwarding service's entry points: a forwarded call names its group.

func (gs *Groups) ApplyLocal(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	return gs.For(ctx).ApplyLocal(ctx, cmd)
}

func (gs *Groups) PopLocal(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	return gs.For(ctx).PopLocal(ctx, in, wait)
}

func (gs *Groups) ReadIndex(ctx context.Context) (uint64, error) { return gs.For(ctx).ReadIndex(ctx) }

// Settle settles the log of the group ctx names (Node.Settle).
func (gs *Groups) Settle(ctx context.Context) error { return gs.For(ctx).Settle(ctx) }

func (gs *Groups) QueryLocal(ctx context.Context, q *command.Query) (*command.QueryResult, error) {
	return gs.For(ctx).QueryLocal(ctx, q)
}

// RemoveServerLocal removes the voter from the group ctx names (a
// forwarded call's), if this node leads it.
func (gs *Groups) RemoveServerLocal(ctx context.Context, id, actor string) error {
	return gs.named(ctx).RemoveServerLocal(ctx, id, actor)
}

// RemoveServer removes a voter from every group, each at its leader.
func (gs *Groups) RemoveServer(ctx context.Context, id, actor string) error {
	var errs []error
	for g, n := range gs.nodes {
		if err := n.RemoveServer(WithGroup(ctx, g), id, actor); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DrainPushBuffer drains every group's buffers and says how many pushes
// still wait in all of them.
func (gs *Groups) DrainPushBuffer(ctx context.Context, timeout time.Duration) uint64 {
	var left uint64
	for g, n := range gs.nodes {
		left += n.DrainPushBuffer(WithGroup(ctx, g), timeout)
	}
	return left
}

// Backup writes the backup of the group ctx names (WithGroup), or of every
// group, one record after the other (with one group, the one record it
// always was); it returns the last record's header.
func (gs *Groups) Backup(ctx context.Context, w io.Writer, version string) (backup.Header, error) {
	if _, ok := GroupFrom(ctx); ok {
		return gs.named(ctx).Backup(ctx, w, version)
	}
	var h backup.Header
	for g, n := range gs.nodes {
		var err error
		if h, err = n.Backup(ctx, w, version); err != nil {
			return h, fmt.Errorf("raft group %d: %w", g, err)
		}
	}
	return h, nil
}

// Restore installs a backup of one group into the group ctx names, or
// group 0 (Node.installs refuses a backup of another group).

func (gs *Groups) Restore(ctx context.Context, r io.Reader) (backup.Header, uint64, error) {
	return gs.named(ctx).Restore(ctx, r)
}

// StateHash is group 0's state hash; StateHashIn the one of the group ctx
// names (WithGroup), or of group 0.
func (gs *Groups) StateHash() (uint64, string, error) { return gs.nodes[0].StateHash() }

func (gs *Groups) StateHashIn(ctx context.Context) (uint64, string, error) {
	return gs.named(ctx).StateHash()
}

// StateHashIn of a Node is its StateHash.
func (n *Node) StateHashIn(context.Context) (uint64, string, error) { return n.StateHash() }

func (gs *Groups) named(ctx context.Context) *Node {
	if g, ok := GroupFrom(ctx); ok && g < len(gs.nodes) {
		return gs.nodes[g]
	}
	return gs.nodes[0]
}

func (gs *Groups) Now() int64 { return gs.nodes[0].Now() }

func (gs *Groups) Status() RaftStatus { return gs.nodes[0].Status() }

func (gs *Groups) Load() LoadStatus { return gs.nodes[0].Load() }

func (gs *Groups) Cluster() ClusterView { return gs.nodes[0].Cluster() }

func (gs *Groups) ID() string { return gs.nodes[0].ID() }

func (gs *Groups) IsLeader() bool { return gs.nodes[0].IsLeader() }

func (gs *Groups) Draining() <-chan struct{} { return gs.nodes[0].Draining() }

// Ready: every group knows a leader and is caught up.
func (gs *Groups) Ready() bool {
	for _, n := range gs.nodes {
		if !n.Ready() {
			return false
		}
	}
	return true
}

// Tenants are every group's tenants, the default first.
func (gs *Groups) Tenants() []string {
	var out []string
	for _, n := range gs.nodes {
		for _, t := range n.Tenants() {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// GroupStatus is one group as /health and ctl cluster show it.
type GroupStatus struct {
	Group       int    `json:"group"`
	Role        string `json:"role"`
	Term        uint64 `json:"term"`
	Applied     uint64 `json:"applied"`
	CommitIndex uint64 `json:"commit"`
	Leader      string `json:"leader"`
	// Resync: this group's replica here is being rebuilt from the group's
	// leader after it found its files damaged (resync.go); absent if not.
	Resync *ResyncStatus `json:"resync,omitempty"`
}

// GroupsStatus is every group's.
func (gs *Groups) GroupsStatus() []GroupStatus {
	out := make([]GroupStatus, len(gs.nodes))
	for g, n := range gs.nodes {
		st := n.Status()
		out[g] = GroupStatus{Group: g, Role: st.Role, Term: st.Term, Applied: st.StateApplied, CommitIndex: st.CommitIndex, Leader: st.LeaderID, Resync: st.Resync}
	}
	return out
}

// GroupsStatus of a Node is its one group's.
func (n *Node) GroupsStatus() []GroupStatus {
	st := n.Status()
	return []GroupStatus{{Group: n.cfg.Group, Role: st.Role, Term: st.Term, Applied: st.StateApplied, CommitIndex: st.CommitIndex, Leader: st.LeaderID, Resync: st.Resync}}
}

// StatusOf is the Raft state of the group of the tenant ctx carries (its
// leader is where that tenant's writes go: /health's tenant object and
// the Leader RPC name it, so a client sends there directly).
func (gs *Groups) StatusOf(ctx context.Context) RaftStatus { return gs.For(ctx).Status() }

// GroupFor is the group of the tenant ctx carries.
func (gs *Groups) GroupFor(ctx context.Context) int { return gs.For(ctx).cfg.Group }

// StatusOf of a Node is its Status: it is one group.
func (n *Node) StatusOf(context.Context) RaftStatus { return n.Status() }

// GroupFor of a Node is its group.
func (n *Node) GroupFor(context.Context) int { return n.cfg.Group }
