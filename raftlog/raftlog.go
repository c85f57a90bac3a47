package raftlog

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
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
	// CacheBytes bounds the in-memory cache of recent entries; 0 = 32 MiB.
	CacheBytes int
	// ServerTLS and ClientTLS make the transport mutual TLS (both or
	// neither): the listener's and the dialer's configurations.
	ServerTLS, ClientTLS *tls.Config
	// OnCorrupt is told of every command entry read from the log files
	// whose checksum fails (command.CheckEntry); nil = only logged.
	OnCorrupt func(error)
}

// Stores are the opened parts.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	Transport *Transport
	// LogKind is where the log lives: LogWAL or LogBolt.
	LogKind  string
	bolt     *raftboltdb.BoltStore
	closeLog func() error // nil when bolt holds the log
}

// Transport is hashicorp/raft's TCP transport without its pipeline:
// replication to a follower sends one AppendEntries at a time and waits for
// the answer in the same goroutine, and entries proposed meanwhile go in the
// next one (group commit). The pipeline saves a round trip between batches,
// nothing on loopback or a LAN, and costs two goroutine hand-offs per batch
// (the sender, the response decoder) on the commit path.
type Transport struct{ *raft.NetworkTransport }

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
		cacheBytes = 32 << 20
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
	adv := cfg.AdvertiseAddr
	if adv == "" {
		adv = cfg.BindAddr
	}
	host, _, err := net.SplitHostPort(adv)
	if err != nil {
		return fail(fmt.Errorf("raftlog: advertise address %q: %w", adv, err))
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fail(fmt.Errorf("raftlog: %q is not an address other nodes can reach; set an advertise address", adv))
	}
	pool := cfg.MaxPool
	if pool == 0 {
		pool = 4
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return fail(fmt.Errorf("raftlog: transport on %s: %w", cfg.BindAddr, err))
	}
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.ServerTLS)
	}
	trans := raft.NewNetworkTransportWithLogger(&streamLayer{Listener: ln, advertise: hostAddr(adv), clientTLS: cfg.ClientTLS},
		pool, timeout, logger.Named("transport"))
	return &Stores{Log: logs, Stable: bs, Snapshots: snaps, Transport: &Transport{trans}, LogKind: kind, bolt: bs, closeLog: closeLog}, nil
}

// Close closes the transport, the log and the stable store.
func (s *Stores) Close() error {
	errs := []error{s.Transport.Close()}
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
