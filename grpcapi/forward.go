package grpcapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/internalpb"
	"github.com/queen-node/queen-node/tenant"
)

// Leader is what the forwarding service needs from the node: operations
// that run only if this node leads, and answer ErrNotLeader otherwise.
type Leader interface {
	ApplyLocal(ctx context.Context, cmd *command.Command) (proto.Message, error)
	PopLocal(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error)
	ReadIndex(ctx context.Context) (uint64, error)
	QueryLocal(ctx context.Context, q *command.Query) (*command.QueryResult, error)
	RemoveServerLocal(ctx context.Context, id, actor string) error
}

// ForwardServer is the leader's side of forwarding.
type ForwardServer struct {
	internalpb.UnimplementedForwardServer
	node Leader
}

// NewForwardServer serves node's leader operations.
func NewForwardServer(node Leader) *ForwardServer { return &ForwardServer{node: node} }

// Apply proposes a forwarded command.
func (s *ForwardServer) Apply(ctx context.Context, cmd *command.Command) (*command.Response, error) {
	res, err := s.node.ApplyLocal(forwarded(ctx), cmd)
	if err != nil {
		return nil, forwardStatus(err)
	}
	return command.Wrap(res), nil
}

// Pop runs a forwarded pop, long-poll included.
func (s *ForwardServer) Pop(ctx context.Context, req *internalpb.PopRequest) (*command.PopResult, error) {
	if req.Pop == nil {
		return nil, status.Error(codes.InvalidArgument, "a forwarded pop without its pop")
	}
	res, err := s.node.PopLocal(forwarded(ctx), req.Pop, time.Duration(req.WaitMs)*time.Millisecond)
	if err != nil {
		return nil, forwardStatus(err)
	}
	return res, nil
}

// ReadIndex answers a follower's read index request.
func (s *ForwardServer) ReadIndex(ctx context.Context, _ *internalpb.ReadIndexRequest) (*internalpb.ReadIndexReply, error) {
	i, err := s.node.ReadIndex(forwarded(ctx))
	if err != nil {
		return nil, forwardStatus(err)
	}
	return &internalpb.ReadIndexReply{Index: i}, nil
}

// Query answers a follower's linearizable query.
func (s *ForwardServer) Query(ctx context.Context, q *command.Query) (*command.QueryResult, error) {
	res, err := s.node.QueryLocal(forwarded(ctx), q)
	if err != nil {
		return nil, forwardStatus(err)
	}
	return res, nil
}

// RemoveServer removes a voter on an operator's request.
func (s *ForwardServer) RemoveServer(ctx context.Context, req *internalpb.RemoveServerRequest) (*internalpb.RemoveServerReply, error) {
	if err := s.node.RemoveServerLocal(forwarded(ctx), req.Id, req.Actor); err != nil {
		return nil, forwardStatus(err)
	}
	return &internalpb.RemoveServerReply{}, nil
}

// forwardTenantKey is the metadata a forwarded call names its tenant in:
// the leader reads and writes that tenant's state, as the node that took
// the call would have.
const forwardTenantKey = "x-queen-forwarded-tenant"

// forwardTenant puts the tenant ctx carries into a forwarded call.
func forwardTenant(ctx context.Context) context.Context {
	if !tenant.Carried(ctx) {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, forwardTenantKey, tenant.From(ctx))
}

// forwardGroupKey is the metadata a forwarded call names its Raft group
// in (--raft-groups): the leader runs it in that group, whichever tenant
// it is for. Absent: group 0 (a node of one group sends none).
const forwardGroupKey = "x-queen-forwarded-group"

// forwarded is ctx carrying the tenant and the group a forwarded call
// names.
func forwarded(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(forwardTenantKey); len(v) == 1 && tenant.Valid(v[0]) == nil {
		ctx = tenant.With(ctx, v[0])
	}
	if v := md.Get(forwardGroupKey); len(v) == 1 {
		if g, err := strconv.Atoi(v[0]); err == nil && g >= 0 {
			ctx = cluster.WithGroup(ctx, g)
		}
	}
	return ctx
}

// ForGroup is the client group g's Node forwards with: every call names
// the group.
func (c *ForwardClient) ForGroup(g int) cluster.Forwarder {
	if g == 0 {
		return c
	}
	return groupForwarder{c: c, group: strconv.Itoa(g)}
}

type groupForwarder struct {
	c     *ForwardClient
	group string
}

func (f groupForwarder) named(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardGroupKey, f.group)
}

func (f groupForwarder) Apply(ctx context.Context, addr string, cmd *command.Command) (proto.Message, error) {
	return f.c.Apply(f.named(ctx), addr, cmd)
}

func (f groupForwarder) Pop(ctx context.Context, addr string, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	return f.c.Pop(f.named(ctx), addr, in, wait)
}

func (f groupForwarder) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	return f.c.ReadIndex(f.named(ctx), addr)
}

func (f groupForwarder) Query(ctx context.Context, addr string, q *command.Query) (*command.QueryResult, error) {
	return f.c.Query(f.named(ctx), addr, q)
}

func (f groupForwarder) RemoveServer(ctx context.Context, addr, id, actor string) error {
	return f.c.RemoveServer(f.named(ctx), addr, id, actor)
}

// ForwardClient is a follower's side: one connection per leader address,
// kept and reused.
type ForwardClient struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	creds credentials.TransportCredentials
}

// NewForwardClient makes a client with no connections yet; peer, when
// set, is the TLS of the links between nodes (tlsfiles.Peer.ClientConfig,
// mutual; or tlsfiles.Pair.ClientConfig when the gRPC port serves the
// public pair only).
func NewForwardClient(peer *tls.Config) *ForwardClient {
	creds := insecure.NewCredentials()
	if peer != nil {
		creds = credentials.NewTLS(peer)
	}
	return &ForwardClient{conns: map[string]*grpc.ClientConn{}, creds: creds}
}

func (c *ForwardClient) client(addr string) (internalpb.ForwardClient, *grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.conns[addr]
	if !ok {
		var err error
		conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: dial %s: %v", cluster.ErrNoLeader, addr, err)
		}
		c.conns[addr] = conn
	}
	return internalpb.NewForwardClient(conn), conn, nil
}

// unreachable waits briefly for the connection to the leader to be up and
// reports whether it is down: a call on a connection that cannot connect
// would fail before sending anything, so a write there is not in doubt (the
// caller waits for the next leader instead of answering outcome_unknown).
func unreachable(ctx context.Context, conn *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	for {
		switch s := conn.GetState(); s {
		case connectivity.Ready:
			return false
		case connectivity.TransientFailure, connectivity.Shutdown:
			return true
		default:
			conn.Connect()
			if !conn.WaitForStateChange(ctx, s) {
				return false // undecided in time: try the call
			}
		}
	}
}

// Apply forwards a command to the leader at addr.
func (c *ForwardClient) Apply(ctx context.Context, addr string, cmd *command.Command) (proto.Message, error) {
	cl, conn, err := c.client(addr)
	if err != nil {
		return nil, err
	}
	if unreachable(ctx, conn) {
		return nil, fmt.Errorf("%w: leader %s unreachable", cluster.ErrNoLeader, addr)
	}
	resp, err := cl.Apply(forwardTenant(ctx), cmd)
	if err != nil {
		return nil, fromForwardStatus(err, true)
	}
	if resp.InternalError != "" {
		return nil, fmt.Errorf("%w: %s", cluster.ErrInternal, resp.InternalError)
	}
	return command.Unwrap(resp), nil
}

// Pop forwards a pop; a pop claims a lease, so it is a write.
func (c *ForwardClient) Pop(ctx context.Context, addr string, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	cl, conn, err := c.client(addr)
	if err != nil {
		return nil, err
	}
	if unreachable(ctx, conn) {
		return nil, fmt.Errorf("%w: leader %s unreachable", cluster.ErrNoLeader, addr)
	}
	res, err := cl.Pop(forwardTenant(ctx), &internalpb.PopRequest{Pop: in, WaitMs: wait.Milliseconds()})
	if err != nil {
		return nil, fromForwardStatus(err, true)
	}
	return res, nil
}

// ReadIndex asks the leader for a read index.
func (c *ForwardClient) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	cl, _, err := c.client(addr)
	if err != nil {
		return 0, err
	}
	r, err := cl.ReadIndex(ctx, &internalpb.ReadIndexRequest{})
	if err != nil {
		return 0, fromForwardStatus(err, false)
	}
	return r.Index, nil
}

// Query has the leader answer a linearizable query; a read, so never in
// doubt.
func (c *ForwardClient) Query(ctx context.Context, addr string, q *command.Query) (*command.QueryResult, error) {
	cl, _, err := c.client(addr)
	if err != nil {
		return nil, err
	}
	r, err := cl.Query(forwardTenant(ctx), q)
	if err != nil {
		return nil, fromForwardStatus(err, false)
	}
	return r, nil
}

// RemoveServer asks the leader to remove a voter.
func (c *ForwardClient) RemoveServer(ctx context.Context, addr, id, actor string) error {
	cl, _, err := c.client(addr)
	if err != nil {
		return err
	}
	_, err = cl.RemoveServer(ctx, &internalpb.RemoveServerRequest{Id: id, Actor: actor})
	return fromForwardStatus(err, true)
}

// Close closes every connection.
func (c *ForwardClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, conn := range c.conns {
		conn.Close()
		delete(c.conns, a)
	}
}
