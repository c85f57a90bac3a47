package raftlog

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"
)

// Config says where the Raft files live and how the transport listens.
type Config struct {
	Dir string // holds raft.db (the stable store), wal/ (the log) and snapshots/
	// Log says where the log lives: LogWAL ("" too) or LogBolt. A log
	// found in the other store is moved at Open.
	Log string
	// SegmentBytes sizes raft-wal's segment files; 0 = DefaultSegmentBytes.
	SegmentBytes  int
	BindAddr      string // host:port the transport listens on
	AdvertiseAddr string // host:port other nodes dial; "" = BindAddr
	Logger        hclog.Logger
	// MaxPool is the transport's connection pool per peer; 0 = 4.
	MaxPool int
	// Timeout is the transport's I/O deadline; 0 = 10s.
	Timeout time.Duration
	// SnapshotsRetained; 0 = 2.
	SnapshotsRetained int
	// CacheBytes bounds the in-memory cache of recent entries; 0 =
	// DefaultCacheBytes. A node of several Raft groups gives each group its
	// share of one node-wide budget (CacheShare), so that memory does not
	// grow with the number of groups.
	CacheBytes int
	// ServerTLS and ClientTLS make the transport mutual TLS (both or
	// neither): the listener's and the dialer's configurations.
	ServerTLS, ClientTLS *tls.Config
	// OnCorrupt is told of every command entry read from the log files
	// whose checksum fails (command.CheckEntry); nil = only logged.
	OnCorrupt func(error)
	// NoTransport opens the stores only (Stores.Transport is nil): to read
	// them before the node starts.
	NoTransport bool
	// Layer, when set, is the stream layer of the transport (a group's of a
	// Mux) instead of a listener on BindAddr.
	Layer raft.StreamLayer
}

// DefaultCacheBytes is a node's budget for cached log entries, over all of
// its Raft groups: about two seconds of log at this machine's peak batched
// push (15-20 MB/s of entries), which covers what a follower that keeps
// up (its apply reads) and a leader replicating to it read back; a group
// gets its share, and receives its share of the traffic.
const DefaultCacheBytes = 32 << 20

// CacheShare is one group's share of a node-wide cache budget of total
// bytes (0 = DefaultCacheBytes) when the node runs groups groups.
func CacheShare(total, groups int) int {
	if total <= 0 {
		total = DefaultCacheBytes
	}
	return total / max(groups, 1)
}

// Stores are the opened parts.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	Transport *Transport
	// LogKind is where the log lives: LogWAL or LogBolt.
	LogKind   string
	bolt      *raftboltdb.BoltStore
	closeLog  func() error // nil when bolt holds the log
	onCorrupt func(error)
}

// Transport is hashicorp/raft's TCP transport without its pipeline:
// replication to a follower sends one AppendEntries at a time and waits for
// the answer in the same goroutine, and entries proposed meanwhile go in the
// next one (group commit). The pipeline saves a round trip between batches,
// nothing on loopback or a LAN, and costs two goroutine hand-offs per batch
// (the sender, the response decoder) on the commit path.
type Transport struct {
	*raft.NetworkTransport
	consumer chan raft.RPC // set by Quarantine
	closed   chan struct{} // closed by Close: the quarantine's relay ends
	once     sync.Once
}

// Close closes the transport and ends the quarantine's relay.
func (t *Transport) Close() error {
	t.once.Do(func() { close(t.closed) })
	return t.NetworkTransport.Close()
}

// AppendEntriesPipeline declines, so Raft replicates synchronously.
func (t *Transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Open opens (creating) the log, stable store, snapshot store and transport.
func Open(cfg Config) (*Stores, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	bs, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.Dir, "raft.db"),
		BoltOptions: &bolt.Options{
			Timeout:        5 * time.Second,
			NoFreelistSync: true,
			FreelistType:   bolt.FreelistMapType,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open log: %w", err)
	}
	kind, err := ParseLog(cfg.Log)
	if err != nil {
		bs.Close()
		return nil, err
	}
	store, closeLog, err := openLog(cfg.Dir, kind, cfg.SegmentBytes, bs, logger)
	if err != nil {
		bs.Close()
		return nil, err
	}
	fail := func(err error) (*Stores, error) {
		if closeLog != nil {
			closeLog()
		}
		bs.Close()
		return nil, err
	}
	cacheBytes := cfg.CacheBytes
	if cacheBytes == 0 {
		cacheBytes = DefaultCacheBytes
	}
	logs, err := newByteCache(store, cacheBytes)
	if err != nil {
		return fail(fmt.Errorf("raftlog: log: %w", err))
	}
	logs.onCorrupt = func(err error) {
		logger.Error("a log entry read from disk is damaged: it is neither sent nor applied", "error", err)
		if cfg.OnCorrupt != nil {
			cfg.OnCorrupt(err)
		}
	}
	retain := cfg.SnapshotsRetained
	if retain == 0 {
		retain = 2
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, retain, logger.Named("snapshot"))
	if err != nil {
		return fail(fmt.Errorf("raftlog: snapshots: %w", err))
	}
	if cfg.NoTransport {
		return &Stores{Log: logs, Stable: bs, Snapshots: snaps, LogKind: kind, bolt: bs, closeLog: closeLog, onCorrupt: cfg.OnCorrupt}, nil
	}
	adv := cfg.AdvertiseAddr
	if adv == "" {
		adv = cfg.BindAddr
	}
	if err := reachable(adv); err != nil {
		return fail(err)
	}
	pool := cfg.MaxPool
	if pool == 0 {
		pool = 4
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	layer := cfg.Layer
	if layer == nil {
		ln, err := net.Listen("tcp", cfg.BindAddr)
		if err != nil {
			return fail(fmt.Errorf("raftlog: transport on %s: %w", cfg.BindAddr, err))
		}
		if cfg.ServerTLS != nil {
			ln = tls.NewListener(ln, cfg.ServerTLS)
		}
		layer = &streamLayer{Listener: ln, advertise: hostAddr(adv), clientTLS: cfg.ClientTLS}
	}
	trans := raft.NewNetworkTransportWithLogger(layer, pool, timeout, logger.Named("transport"))
	return &Stores{Log: logs, Stable: bs, Snapshots: snaps, Transport: &Transport{NetworkTransport: trans, closed: make(chan struct{})}, LogKind: kind, bolt: bs, closeLog: closeLog, onCorrupt: cfg.OnCorrupt}, nil
}

// Close closes the transport, the log and the stable store.
func (s *Stores) Close() error {
	var errs []error
	if s.Transport != nil {
		errs = append(errs, s.Transport.Close())
	}
	if s.closeLog != nil {
		errs = append(errs, s.closeLog())
	}
	return errors.Join(append(errs, s.bolt.Close())...)
}

// HasState reports whether this node has Raft state from an earlier run.
func (s *Stores) HasState() (bool, error) {
	return raft.HasExistingState(s.Log, s.Stable, s.Snapshots)
}

// LatestSnapshot opens the newest snapshot, if any. The caller closes it.
func (s *Stores) LatestSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	list, err := s.Snapshots.List()
	if err != nil || len(list) == 0 {
		return nil, nil, err
	}
	return s.Snapshots.Open(list[0].ID)
}

// Tuning holds the knobs of raft.Config the node sets; zero fields keep the
// defaults below.
type Tuning struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
}

// RaftConfig builds the node's raft.Config. Group commit comes from
// BatchApplyCh with a large MaxAppendEntries: concurrent Apply calls share
// one log write, one fsync and one FSM batch.
func RaftConfig(id string, t Tuning, logger hclog.Logger) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.Logger = logger
	c.MaxAppendEntries = 512
	c.BatchApplyCh = true
	c.NoSnapshotRestoreOnStart = true // the FSM's own file is durable; see fsm/DESIGN.md
	// Snapshots copy the whole state file, so they are taken by log size
	// (cluster's snapshotLoop) rather than every few thousand entries; this
	// entry count is only a backstop for entries that are all tiny.
	c.SnapshotThreshold = 262144
	c.SnapshotInterval = 60 * time.Second
	c.TrailingLogs = 10240
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&c.HeartbeatTimeout, t.HeartbeatTimeout)
	set(&c.ElectionTimeout, t.ElectionTimeout)
	set(&c.LeaderLeaseTimeout, t.LeaderLeaseTimeout)
	set(&c.SnapshotInterval, t.SnapshotInterval)
	if t.SnapshotThreshold > 0 {
		c.SnapshotThreshold = t.SnapshotThreshold
	}
	if t.TrailingLogs > 0 {
		c.TrailingLogs = t.TrailingLogs
	}
	return c
}

// Quarantine makes the transport answer every vote, pre-vote and
// leadership-transfer request itself with a refusal while refuse() is true,
// so Raft never sees them: a node rebuilding its state from the leader must
// neither vote nor stand for election until it holds every committed entry
// again (hashicorp/raft has no switch for that; cluster/resync.go). Call it
// before raft.NewRaft, which takes the transport's Consumer once.
func (t *Transport) Quarantine(refuse func() bool) {
	in := t.NetworkTransport.Consumer()
	out := make(chan raft.RPC)
	t.consumer = out
	go func() {
		for {
			var rpc raft.RPC
			select {
			case rpc = <-in:
			case <-t.closed:
				return
			}
			if refuse() && refuseRPC(rpc) {
				continue
			}
			select {
			case out <- rpc:
			case <-t.closed:
				return
			}
		}
	}()
}

// Consumer is where Raft takes its RPCs from: the transport's own channel,
// or the quarantine's.
func (t *Transport) Consumer() <-chan raft.RPC {
	if t.consumer != nil {
		return t.consumer
	}
	return t.NetworkTransport.Consumer()
}

// errQuarantined answers a leadership transfer to a quarantined node.
var errQuarantined = errors.New("raftlog: this node is rebuilding its state from the leader and does not stand for election")

// refuseRPC answers rpc with a refusal when it asks for a vote or a
// candidacy, and reports whether it did.
func refuseRPC(rpc raft.RPC) bool {
	switch req := rpc.Command.(type) {
	case *raft.RequestVoteRequest:
		rpc.Respond(&raft.RequestVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: req.Term, Granted: false}, nil)
	case *raft.RequestPreVoteRequest:
		rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: req.ProtocolVersion}, Term: req.Term, Granted: false}, nil)
	case *raft.TimeoutNowRequest:
		rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: req.ProtocolVersion}}, errQuarantined)
	default:
		return false
	}
	return true
}

// DropLog deletes every entry of the log, keeping the stable store (the
// term and the vote): what a node rebuilding from the leader does with a
// log it cannot trust (cluster/resync.go).
func (s *Stores) DropLog() error {
	first, err := s.Log.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.Log.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	return s.Log.DeleteRange(first, last)
}

// CheckLog reads every entry of the log and checks each command entry's
// checksum (the log's check at open). It returns the latest configuration
// the snapshots and the log hold (so a caller knows, before Raft starts,
// whether other voters could rebuild this node) and the first entry that
// is damaged or unreadable, also reported to Config.OnCorrupt, or nil.
func (s *Stores) CheckLog() (raft.Configuration, error) {
	var latest raft.Configuration
	if list, err := s.Snapshots.List(); err == nil && len(list) > 0 {
		latest = list[0].Configuration // from its meta file: readable even if its state is damaged
	}
	first, err := s.Log.FirstIndex()
	if err != nil {
		return latest, err
	}
	last, err := s.Log.LastIndex()
	if err != nil {
		return latest, err
	}
	var damaged error
	var l raft.Log
	for i := first; i <= last && last > 0; i++ {
		if err := s.Log.GetLog(i, &l); err != nil {
			if damaged == nil {
				damaged = fmt.Errorf("raftlog: entry %d of %d..%d: %w", i, first, last, err)
				if s.onCorrupt != nil {
					s.onCorrupt(fmt.Errorf("raft log entry %d of %d..%d does not read back: %w", i, first, last, err))
				}
			}
			continue
		}
		if l.Type == raft.LogConfiguration {
			if c, ok := decodeConfiguration(l.Data); ok {
				latest = c
			}
		}
	}
	return latest, damaged
}

// CheckSnapshot opens the newest snapshot, which reads it whole to check
// its CRC-64 (hashicorp/raft's FileSnapshotStore), and returns its index
// (0: no snapshot) or why it does not open.
func (s *Stores) CheckSnapshot() (uint64, error) {
	list, err := s.Snapshots.List()
	if err != nil || len(list) == 0 {
		return 0, err
	}
	meta, rc, err := s.Snapshots.Open(list[0].ID)
	if err != nil {
		return list[0].Index, fmt.Errorf("raftlog: snapshot %s does not open: %w", list[0].ID, err)
	}
	rc.Close()
	return meta.Index, nil
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on bytes it
// cannot decode.
func decodeConfiguration(b []byte) (c raft.Configuration, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return raft.DecodeConfiguration(b), true
}

// reachable refuses an advertise address other nodes cannot dial.
func reachable(adv string) error {
	host, _, err := net.SplitHostPort(adv)
	if err != nil {
		return fmt.Errorf("raftlog: advertise address %q: %w", adv, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("raftlog: %q is not an address other nodes can reach; set an advertise address", adv)
	}
	return nil
}
