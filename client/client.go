package queen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
)

// Client talks to a queen-node broker over the Queen HTTP API or over gRPC
// (queen.v1); both behave the same behind it. It is safe for concurrent
// use. Every call takes a context; failures the broker calls retryable
// (Error.Retryable: HTTP 5xx, gRPC UNAVAILABLE, a connection lost on the
// way, an Idempotency-Key still in flight) are retried with exponential
// backoff and jitter under the RetryPolicy, and nothing else is (a rate
// limit only if the policy says so).
type Client struct {
	t     transport
	retry RetryPolicy
}

// Option configures a Client.
type Option func(*config)

type config struct {
	hc        *http.Client
	dialOpts  []grpc.DialOption
	retry     RetryPolicy
	transport string
	token     TokenSource
	routing   *bool
	tenant    string // "" = none named: the token's claim, or the default tenant
}

// WithTenant names the tenant of every call in the x-queen-tenant header
// (gRPC metadata). A node reads it only with --trust-tenant-header or for
// an admin token of every tenant; a token's own tenant claim wins over it.
func WithTenant(name string) Option { return func(c *config) { c.tenant = name } }

// WithLeaderRouting turns leader routing on or off. It is on when New is
// given several nodes and off for one (which may be a load balancer, or a
// network where the leader's advertised address cannot be reached): on,
// every call goes to the leader the nodes name.
func WithLeaderRouting(on bool) Option { return func(c *config) { c.routing = &on } }

// TokenSource returns the bearer token (a JWT) for the next call; it may
// refresh it. An error fails the call without sending it.
type TokenSource func(ctx context.Context) (string, error)

// WithToken sends tok as the bearer token on every call (spec §4.17).
func WithToken(tok string) Option {
	return WithTokenSource(func(context.Context) (string, error) { return tok, nil })
}

// WithTokenSource asks src for the bearer token before every call (a
// callback that refreshes a token before it expires).
func WithTokenSource(src TokenSource) Option { return func(c *config) { c.token = src } }

// WithHTTPClient sets the HTTP client of the HTTP transport. Its Timeout
// must leave room for long-poll pops (Wait + a few seconds), or be 0.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.hc = hc } }

// WithGRPCDialOptions adds dial options to the gRPC transport (TLS
// credentials, interceptors, ...). Without any the connection is plaintext.
func WithGRPCDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithRetry sets the retry policy.
func WithRetry(p RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithGRPC makes a target without a scheme ("host:port") a gRPC target.
func WithGRPC() Option { return func(c *config) { c.transport = "grpc" } }

// New connects to a broker. target picks the transport:
//
//	http://127.0.0.1:6632    the Queen HTTP API (https:// too)
//	grpc://127.0.0.1:6633    gRPC, queen.v1
//	127.0.0.1:6633           gRPC with WithGRPC()
//
// target may name several nodes of a cluster, separated by commas
// ("http://10.0.0.1:6632,http://10.0.0.2:6632"). The client then sends
// every call to the Raft leader, whose address the nodes name (GET
// /health, the Leader RPC), and to the given nodes in turn while it does
// not know the leader or cannot reach it (WithLeaderRouting turns this on
// for one node, or off). No request is sent until the first call.
func New(target string, opts ...Option) (*Client, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tenant != "" {
		cfg.dialOpts = append(cfg.dialOpts, grpc.WithChainUnaryInterceptor(tenantUnary(cfg.tenant)),
			grpc.WithChainStreamInterceptor(tenantStream(cfg.tenant)))
	}
	c := &Client{retry: cfg.retry.withDefaults()}
	var nodes []transport
	var dial func(addr string) (transport, error)
	byAddr := map[string]transport{} // a leader that is one of the given nodes takes that node's connections
	for _, tg := range strings.Split(target, ",") {
		tg = strings.TrimSpace(tg)
		t, d, err := open(tg, &cfg)
		if err != nil {
			for _, n := range nodes {
				n.close()
			}
			return nil, fmt.Errorf("queen: %w", err)
		}
		nodes, dial = append(nodes, t), d
		if u, err := url.Parse(tg); err == nil && u.Host != "" {
			byAddr[u.Host] = t
		} else {
			byAddr[tg] = t
		}
	}
	routing := len(nodes) > 1
	if cfg.routing != nil {
		routing = *cfg.routing
	}
	switch {
	case len(nodes) == 1 && !routing:
		c.t = nodes[0]
		return c, nil
	case !routing:
		c.t = &router{nodes: nodes} // in turn, never asking who leads
		return c, nil
	}
	c.t = newRouter(nodes, func(addr string) (transport, error) {
		if t, ok := byAddr[addr]; ok {
			return t, nil
		}
		return dial(addr)
	})
	return c, nil
}

// open makes the transport of one target, and a way to dial another
// address of the same kind (a leader's).
func open(target string, cfg *config) (transport, func(addr string) (transport, error), error) {
	u, err := url.Parse(target)
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https"):
		scheme := u.Scheme
		return newHTTP(target, cfg.hc, cfg.token, cfg.tenant), func(addr string) (transport, error) {
			return newHTTP(scheme+"://"+addr, cfg.hc, cfg.token, cfg.tenant), nil
		}, nil
	case err == nil && u.Scheme == "grpc":
		t, err := newGRPC(u.Host, cfg.dialOpts, cfg.token)
		return t, func(addr string) (transport, error) { return newGRPC(addr, cfg.dialOpts, cfg.token) }, err
	case cfg.transport == "grpc":
		t, err := newGRPC(target, cfg.dialOpts, cfg.token)
		return t, func(addr string) (transport, error) { return newGRPC(addr, cfg.dialOpts, cfg.token) }, err
	}
	return nil, nil, fmt.Errorf("target %q: want http://, https:// or grpc:// (or WithGRPC)", target)
}

// Close releases the connections.
func (c *Client) Close() error { return c.t.close() }

// Queue is a handle on one queue; it sends nothing by itself.
func (c *Client) Queue(name string) *Queue { return &Queue{c: c, name: name} }

// KV is the broker's key-value store.
func (c *Client) KV() *KV { return &KV{c: c} }

// Ack settles m as completed, under its lease and in its group.
func (c *Client) Ack(ctx context.Context, m *Message) error { return c.settle(ctx, m, Completed, "") }

// Nack settles m as failed with reason as its error text (kept in the
// dead-letter queue when the retries run out). The lease is released and
// m comes back after the queue's retryDelay.
func (c *Client) Nack(ctx context.Context, m *Message, reason string) error {
	return c.settle(ctx, m, Failed, reason)
}

// AckStatus settles m with any status.
func (c *Client) AckStatus(ctx context.Context, m *Message, s AckStatus, reason string) error {
	return c.settle(ctx, m, s, reason)
}

func (c *Client) settle(ctx context.Context, m *Message, s AckStatus, reason string) error {
	it := ackOf(m, s, reason)
	res, err := do(ctx, c.retry, func(ctx context.Context) ([]AckResult, error) {
		return c.t.ack(ctx, m.ConsumerGroup, it)
	})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return &Error{Message: fmt.Sprintf("ack answered %d results", len(res))}
	}
	if !res[0].Success {
		return &AckError{TransactionID: m.TransactionID, Message: res[0].Error}
	}
	m.settled.Store(true)
	return nil
}

func ackOf(m *Message, s AckStatus, reason string) ackItem {
	it := ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Group: m.ConsumerGroup, Status: s}
	if reason != "" {
		it.Error = &reason
	}
	return it
}

// Settle is one message of an AckBatch and how to settle it.
type Settle struct {
	Message *Message
	Status  AckStatus // "" = Completed
	Reason  string    // the error text of a failed settle
}

// AckBatch settles messages of one consumer group in one request, all
// judged against the state as it was when the request arrived (so a failed
// item releases the lease without refusing the items beside it). It
// returns one result per item; the ones that succeeded are marked settled.
func (c *Client) AckBatch(ctx context.Context, batch []Settle) ([]AckResult, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	group := batch[0].Message.ConsumerGroup
	items := make([]ackItem, len(batch))
	for i, s := range batch {
		if s.Message.ConsumerGroup != group {
			return nil, errors.New("queen: AckBatch: messages of more than one consumer group")
		}
		if s.Status == "" {
			s.Status = Completed
		}
		items[i] = ackOf(s.Message, s.Status, s.Reason)
	}
	res, err := do(ctx, c.retry, func(ctx context.Context) ([]AckResult, error) {
		return c.t.ackBatch(ctx, group, items)
	})
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.Success && i < len(batch) {
			batch[i].Message.settled.Store(true)
		}
	}
	return res, nil
}

// ExtendLease pushes a lease's expiry to at least now + d (whole seconds,
// at least 1) and returns the new expiry. A lease that is gone (acked,
// released, expired) is a *LeaseError matching ErrLeaseLost.
func (c *Client) ExtendLease(ctx context.Context, leaseID string, d time.Duration) (time.Time, error) {
	secs, _ := ttlSeconds(d)
	res, err := do(ctx, c.retry, func(ctx context.Context) (extendResult, error) {
		return c.t.extend(ctx, leaseID, max(secs, 1))
	})
	if err != nil {
		return time.Time{}, err
	}
	if !res.Success {
		return time.Time{}, &LeaseError{LeaseID: leaseID, Message: res.Error}
	}
	return res.ExpiresAt, nil
}

// newTransactionID mints a UUIDv7: time-ordered, so ids minted by one
// producer sort in push order.
func newTransactionID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
