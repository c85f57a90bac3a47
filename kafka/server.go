package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/tenant"
)

// Node is what the listener needs of its node: *cluster.Groups (a node's
// Raft groups, every call routed to the group of the tenant its ctx
// carries) or *cluster.Node (one group).
type Node interface {
	pipeline.Node
	Read(ctx context.Context, level cluster.ReadLevel, fn func(*fsm.Reader) error) error
	Cluster() cluster.ClusterView
	// StatusOf is the Raft state of the group of the tenant ctx carries:
	// whether this node coordinates that tenant's groups and transactions,
	// and which node leads its partitions.
	StatusOf(ctx context.Context) cluster.RaftStatus
	// Settle returns once every entry the tenant's group leader (this
	// node) has appended is applied: a commit entry whose write ended
	// with an unknown outcome has then committed or never will.
	Settle(ctx context.Context) error
	Watch(ctx context.Context, queue string) <-chan struct{}
	Now() int64
	ID() string
}

// Config configures a listener.
type Config struct {
	Node     Node
	Pipeline *pipeline.Pipeline // the node's one write path, front "kafka"
	Logger   *slog.Logger
	// Advertised is this node's address as Kafka clients reach it; every
	// node's is in gossip (cluster.NodeView.KafkaAddr).
	Advertised string
	// TLS, when set, is the listener's TLS.
	TLS *tls.Config
	// Auth, when set (JWT on), makes SASL PLAIN/OAUTHBEARER the way in:
	// a connection may only run ApiVersions and the SASL calls before it
	// has authenticated. With Auth nil every connection is anonymous.
	Auth *auth.Verifier
	// Trusted: JWT is on but clients are let in without SASL (the network
	// is trusted, --kafka-trusted-network); they act as an anonymous
	// admin, as with JWT off.
	Trusted bool
	Limits  Limits
	Metrics *Metrics
}

// Limits bound what one connection and the producers may hold.
type Limits struct {
	MaxFrameBytes     int           // a request frame; default 16 MiB
	DefaultPartitions int           // a topic made on first use; default 1 (Kafka's num.partitions)
	NoAutoCreate      bool          // a produce to a missing topic is UNKNOWN_TOPIC_OR_PARTITION
	ProducerIdle      time.Duration // a producer's state is kept this long after its last batch; default 24h
	MaxProducers      int           // producers kept; default 100,000
	TxnMaxRecords     int           // one transaction's staged records; default 100,000
	TxnMaxBytes       int           // one transaction's staged bytes; default 8 MiB (below the log's entry limit)
	OpenTxnMaxBytes   int           // every open transaction's staged bytes; default 256 MiB
	TxnMaxTimeout     time.Duration // the longest transaction.timeout.ms accepted; default 15 min (Kafka's)
	MaxFetchWait      time.Duration // a fetch's max_wait_ms is capped here; default 30s
}

func (l *Limits) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxFrameBytes, 16<<20)
	def(&l.DefaultPartitions, 1)
	def(&l.MaxProducers, 100_000)
	def(&l.TxnMaxRecords, 100_000)
	def(&l.TxnMaxBytes, 8<<20)
	def(&l.OpenTxnMaxBytes, 256<<20)
	if l.ProducerIdle <= 0 {
		l.ProducerIdle = 24 * time.Hour
	}
	if l.TxnMaxTimeout <= 0 {
		l.TxnMaxTimeout = 15 * time.Minute
	}
	if l.MaxFetchWait <= 0 {
		l.MaxFetchWait = 30 * time.Second
	}
}

// Server is a node's Kafka listener.
type Server struct {
	cfg    Config
	node   Node
	pipe   *pipeline.Pipeline
	log    *slog.Logger
	groups *coordinator // groups.go
	txns   *txnCoordinator

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	done  chan struct{}
}

// New builds a listener; Serve runs it.
func New(cfg Config) *Server {
	cfg.Limits.defaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	s := &Server{cfg: cfg, node: cfg.Node, pipe: cfg.Pipeline, log: cfg.Logger, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.groups = newCoordinator(s.leads, s.log)
	s.txns = newTxnCoordinator(s)
	return s
}

// leads reports whether this node leads the Raft group of the tenant ctx
// carries: then it coordinates that tenant's consumer groups and
// transactions (with --raft-groups N > 1 another node may lead another
// tenant's group; a call of that tenant is answered NOT_COORDINATOR here).
func (s *Server) leads(ctx context.Context) bool { return s.node.StatusOf(ctx).Role == "leader" }

// tenantCtx is a context of tenant name alone: what a coordinator's own
// loop asks the node with about that tenant.
func tenantCtx(name string) context.Context { return tenant.With(context.Background(), name) }

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	go s.groups.run(s.done)
	go s.txns.run(s.done)
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops accepting and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	return nil
}

// conn is one client connection: requests are answered one at a time, in
// order, as a Kafka broker does.
type conn struct {
	s        *Server
	nc       net.Conn
	remote   string
	clientID string
	ctx      context.Context // the caller's identity once authenticated
	authed   bool
	mech     string // the mechanism SaslHandshake chose
	w        *bufio.Writer
}

func (s *Server) serveConn(nc net.Conn) {
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), w: bufio.NewWriterSize(nc, 64<<10)}
	// the default tenant until SASL names the token's (a Kafka client
	// has no header to name one with)
	c.ctx = tenant.With(withRemote(context.Background(), c.remote), tenant.Default)
	c.authed = s.cfg.Auth == nil || s.cfg.Trusted
	r := bufio.NewReaderSize(nc, 64<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || int(n) > s.cfg.Limits.MaxFrameBytes {
			s.log.Warn("kafka: a request frame over the size limit (or too short to be one): connection closed",
				"remote", c.remote, "bytes", n, "limit", s.cfg.Limits.MaxFrameBytes)
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		if !c.handle(frame) {
			return
		}
	}
}

// header is a request's header (v1, or v2 with tagged fields).
type header struct {
	key, version int16
	corr         int32
	clientID     string
}

var errShortHeader = errors.New("kafka: a request header too short")

func parseHeader(b []byte) (header, []byte, error) {
	if len(b) < 10 {
		return header{}, nil, errShortHeader
	}
	h := header{key: int16(binary.BigEndian.Uint16(b)), version: int16(binary.BigEndian.Uint16(b[2:])),
		corr: int32(binary.BigEndian.Uint32(b[4:]))}
	l := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if l > 0 {
		if int(l) > len(b) {
			return header{}, nil, errShortHeader
		}
		h.clientID, b = string(b[:l]), b[l:]
	}
	return h, b, nil
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errShortHeader
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errShortHeader
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errShortHeader
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// decodeRequest reads one request frame: its header and its body in the
// version it names. A nil request with a nil error is a key or version we
// do not serve (h says which).
func decodeRequest(frame []byte) (header, kmsg.Request, error) {
	h, body, err := parseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	w, ok := versions[h.key]
	if !ok || h.version < w.min || h.version > w.max {
		return h, nil, nil
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return h, nil, fmt.Errorf("kafka: a malformed %s v%d request: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// handle answers one frame; false closes the connection.
func (c *conn) handle(frame []byte) bool {
	s := c.s
	h, req, err := decodeRequest(frame)
	if err != nil {
		s.log.Warn("kafka: a malformed request: connection closed", "remote", c.remote, "err", err)
		return false
	}
	c.clientID = h.clientID
	if req == nil {
		if h.key == kmsg.ApiVersions.Int16() {
			// An ApiVersions we do not know is answered in its v0 form,
			// naming what we serve, so the client retries lower.
			resp := apiVersionsResponse(0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return c.write(h, resp)
		}
		s.log.Warn("kafka: a request of an API or version this node does not serve: connection closed",
			"remote", c.remote, "api", kmsg.NameForKey(h.key), "key", h.key, "version", h.version)
		return false
	}
	s.cfg.Metrics.requests.WithLabelValues(kmsg.NameForKey(h.key)).Inc()
	if !c.authed && h.key != kmsg.ApiVersions.Int16() && h.key != kmsg.SASLHandshake.Int16() && h.key != kmsg.SASLAuthenticate.Int16() {
		s.log.Warn("kafka: a request before SASL authentication: connection closed", "remote", c.remote, "api", kmsg.NameForKey(h.key))
		return false
	}
	resp, keep := c.dispatch(req)
	if resp == nil { // acks=0: no answer at all
		return keep
	}
	return c.write(h, resp) && keep
}

// write sends one response: the correlation id, the response header's
// tagged fields where the header is flexible (never for ApiVersions), the
// body.
func (c *conn) write(h header, resp kmsg.Response) bool {
	buf := make([]byte, 4, 256)
	buf = binary.BigEndian.AppendUint32(buf, uint32(h.corr))
	if resp.IsFlexible() && h.key != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := c.w.Write(buf); err != nil {
		return false
	}
	return c.w.Flush() == nil
}

// dispatch runs one request; keep=false closes the connection after the
// answer (a failed SASL authentication).
func (c *conn) dispatch(req kmsg.Request) (kmsg.Response, bool) {
	ctx := context.WithValue(c.ctx, clientIDKey{}, c.clientID)
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return apiVersionsResponse(r.Version), true
	case *kmsg.SASLHandshakeRequest:
		return c.saslHandshake(r), true
	case *kmsg.SASLAuthenticateRequest:
		return c.saslAuthenticate(r)
	case *kmsg.MetadataRequest:
		return c.s.metadata(ctx, r), true
	case *kmsg.ProduceRequest:
		return c.s.produce(ctx, c, r), true
	case *kmsg.FetchRequest:
		return c.s.fetch(ctx, r), true
	case *kmsg.ListOffsetsRequest:
		return c.s.listOffsets(ctx, r), true
	case *kmsg.FindCoordinatorRequest:
		return c.s.findCoordinator(ctx, r), true
	case *kmsg.JoinGroupRequest:
		return c.s.groups.join(ctx, r), true
	case *kmsg.SyncGroupRequest:
		return c.s.groups.sync(ctx, r), true
	case *kmsg.HeartbeatRequest:
		return c.s.groups.heartbeat(ctx, r), true
	case *kmsg.LeaveGroupRequest:
		return c.s.groups.leave(ctx, r), true
	case *kmsg.DescribeGroupsRequest:
		return c.s.groups.describe(ctx, r), true
	case *kmsg.ListGroupsRequest:
		return c.s.listGroups(ctx, r), true
	case *kmsg.DeleteGroupsRequest:
		return c.s.deleteGroups(ctx, r), true
	case *kmsg.OffsetCommitRequest:
		return c.s.offsetCommit(ctx, r), true
	case *kmsg.OffsetFetchRequest:
		return c.s.offsetFetch(ctx, r), true
	case *kmsg.CreateTopicsRequest:
		return c.s.createTopics(ctx, r), true
	case *kmsg.DeleteTopicsRequest:
		return c.s.deleteTopics(ctx, r), true
	case *kmsg.DescribeConfigsRequest:
		return c.s.describeConfigs(ctx, r), true
	case *kmsg.InitProducerIDRequest:
		return c.s.txns.initProducerID(ctx, r), true
	case *kmsg.AddPartitionsToTxnRequest:
		return c.s.txns.addPartitions(ctx, r), true
	case *kmsg.AddOffsetsToTxnRequest:
		return c.s.txns.addOffsets(ctx, r), true
	case *kmsg.TxnOffsetCommitRequest:
		return c.s.txns.offsetCommit(ctx, r), true
	case *kmsg.EndTxnRequest:
		return c.s.txns.endTxn(ctx, r), true
	}
	return nil, false // unreachable: versions names only the kinds above
}
