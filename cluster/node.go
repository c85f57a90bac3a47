package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/diskspace"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/scrub"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/tlsfiles"
)

// Config configures a Node. Zero values mean the defaults.
type Config struct {
	NodeID        string
	DataDir       string
	RaftAddr      string // bind address of the Raft transport
	RaftAdvertise string // address other nodes dial; "" = RaftAddr
	// BootstrapExpect: 1 bootstraps a one-voter cluster on first start;
	// N > 1 waits for N nodes in gossip (bootstrap.go).
	BootstrapExpect int
	// Gossip: "" runs without memberlist (a single node on its own).
	GossipAddr      string
	GossipAdvertise string   // "" = GossipAddr
	Join            []string // gossip addresses of other nodes
	LocalGossip     bool     // memberlist's fast loopback timings (tests)
	// PeerTLS, when set, makes the Raft transport mutual TLS: only nodes
	// whose certificate the cluster CA signed can join, vote or replicate.
	PeerTLS *tlsfiles.Peer
	// GossipKeys encrypt gossip (16, 24 or 32 bytes each); the first one
	// encrypts, all decrypt. None = gossip in clear text.
	GossipKeys    [][]byte
	HTTPAdvertise string // where clients reach this node's HTTP API
	GRPCAdvertise string // where other nodes forward to this one
	// KafkaAdvertise is where Kafka clients reach this node ("" = its
	// Kafka listener is off); gossip tells the others, for Metadata.
	KafkaAdvertise string
	// SnapshotBytes: take a snapshot once this many bytes of entries were
	// applied since the last one; 0 = 256 MiB. (Raft's own threshold counts
	// entries.)
	SnapshotBytes int64
	Logger        *slog.Logger
	Registry      prometheus.Registerer
	Tuning        raftlog.Tuning
	// RaftLog is where the Raft log lives: raftlog.LogWAL ("" too) or
	// raftlog.LogBolt; a log found in the other is moved at start.
	RaftLog       string
	ApplyTimeout  time.Duration // longest wait for one apply; default 10s
	SweepInterval time.Duration // leader's sweep period; default 2s
	SweepLimit    uint32        // work per sweep entry; default 1000
	// PartitionIdle removes a partition that has held no message for this
	// long (spec §5.9); 0 = never.
	PartitionIdle time.Duration
	TimerTick     time.Duration // how often the leader looks for due timers; default 50ms
	NoSync        bool          // skip fsync of the FSM file (throwaway tests only)
	// MinFreeDisk: below this many free bytes on the data disk the node
	// refuses writes that add data (507 storage_full); below half of it
	// apply pauses until space is freed. 0 = no checks.
	MinFreeDisk uint64
	// MaxInflight bounds the writes this node has in flight (proposed or
	// forwarded, waiting for their entry); beyond it a write is refused
	// with 429 overloaded. 0 = DefaultMaxInflight.
	MaxInflight int
	// BootID overrides the boot id the state file's session records (fault
	// tests simulate a power loss with it).
	BootID string
	// Keys encrypt the payloads of queues with encryptionEnabled (spec
	// §5.12, package atrest); nil = no key file: such queues keep
	// plaintext.
	Keys *atrest.Keyring
	// ScrubRate bounds the bytes per second the background scrub reads
	// of the message files to check them (package scrub); 0 = no scrub.
	// ScrubInterval is the pause between its passes; 0 = 1 hour.
	ScrubRate     float64
	ScrubInterval time.Duration
	// Group is the Raft group this Node is (0 when the node runs one);
	// Groups is how many the node runs (--raft-groups; 0 = 1). A group
	// other than 0 shares group 0's gossip membership (members), takes
	// a stream layer from the node's Raft port mux (Layer: a new one each
	// time its stores open), and bootstraps when group 0 does
	// (OnBootstrap), with the same voters.
	Group, Groups int
	Layer         func() raft.StreamLayer
	members       *members
	// OnBootstrap is told the voters group 0 bootstrapped with.
	OnBootstrap func([]raft.Server)
	// OnResync is called once this node, having found its own files
	// damaged, wrote the RESYNC marker and stopped Raft: the process should
	// restart (the next Start rebuilds the state from the leader:
	// resync.go). nil = the node just stays stopped.
	OnResync func()
}

// Node is one queen-node: Raft plus the FSM plus the leader's loops.
type Node struct {
	cfg    Config
	log    *slog.Logger
	db     *store.DB
	msgs   *msgstore.Store
	fsm    *fsm.FSM
	damage *damage.Report              // what this node found damaged in its files
	checks *stateChecks                // state checks against the other replicas
	pacer  *scrub.Pacer                // the scrub's and the state checks' one read rate; nil = unbounded
	resync atomic.Pointer[resyncState] // nil unless rebuilding from the leader
	// quarantine: neither votes nor stands (a resync, a damaged log at
	// open); nil = never quarantined in this process
	quarantine *quarantine
	// removed: voters the operator removed that gossip still saw alive
	removed removedIDs
	// ownsMembers: this Node started the gossip membership (group 0); the
	// other groups share it and say nothing in it of their own
	ownsMembers bool
	warnGroups  sync.Once // the one log line about a node of another --raft-groups
	stores      *raftlog.Stores
	raft        *raft.Raft
	clock       *stampClock
	hub         *hub
	// parking holds long-poll pops; hub wakes every other watcher
	parking *parking
	m       *metrics

	appliedMu   sync.Mutex
	appliedCh   chan struct{} // closed and replaced after every applied batch
	lastApplyAt time.Time     // monotonic reading at the last applied batch

	ready atomic.Bool // leader, and every entry of earlier terms is applied

	inflight idempotency.InFlight // Idempotency-Keys of commands being applied here
	slots    chan struct{}        // one per write in flight (MaxInflight)
	disk     *diskspace.Monitor

	members *members      // nil without gossip (a single node started alone)
	leaders *leaderEpochs // ends forwards to a leader that was replaced
	fwd     Forwarder     // nil until SetForwarder

	stop      chan struct{}
	draining  chan struct{} // closed by Drain: parked long-polls answer empty
	drainOnce sync.Once
	wg        sync.WaitGroup
	shutdown  sync.Once
}

// Start opens the data directory, restores what an earlier run left, and
// starts Raft.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("cluster: node id is required")
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 2 * time.Second
	}
	if cfg.SweepLimit == 0 {
		cfg.SweepLimit = 1000
	}
	if cfg.SnapshotBytes == 0 {
		cfg.SnapshotBytes = 256 << 20
	}
	if cfg.TimerTick == 0 {
		cfg.TimerTick = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("component", "node", "node", cfg.NodeID),
		clock: newStampClock(), hub: newHub(), parking: newParking(), appliedCh: make(chan struct{}),
		stop: make(chan struct{}), draining: make(chan struct{}), slots: make(chan struct{}, cfg.MaxInflight),
		leaders: newLeaderEpochs(),
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	n.disk = diskspace.New(cfg.DataDir, cfg.MinFreeDisk, n.log)
	marker, err := readResyncMarker(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	fsmMetrics := fsm.NewMetrics(cfg.Registry)
	n.damage = damage.New(n.log, cfg.Registry)
	n.checks = newStateChecks(cfg.Registry)
	if cfg.ScrubRate > 0 {
		n.pacer = scrub.NewPacer(cfg.ScrubRate)
	}
	hlog := newHCLogger(cfg.Logger, "raft")
	open := func(marker *resyncMarker) error { return n.openFiles(marker, fsmMetrics, hlog) }
	if err := open(marker); err != nil {
		if marker != nil || !store.Damaged(err) {
			return nil, err
		}
		if marker, err = n.resyncDamagedState(err, hlog, open); err != nil {
			return nil, err
		}
	}
	if marker == nil {
		if conf, err := n.checkLogAtOpen(); err != nil {
			n.closeStores()
			if marker, err = n.resyncAtOpen(conf, err, open); err != nil {
				return nil, err
			}
		}
	}
	if marker != nil {
		n.resync.Store(&resyncState{marker: *marker, since: time.Now(), phase: "starting"})
		n.quarantine = newQuarantine(n.stores.Transport)
	}
	if err := n.catchUpFromSnapshot(); err != nil {
		n.closeStores()
		return nil, err
	}
	if err := checkKeys(cfg.Keys, n.fsm.SealingKeys()); err != nil {
		n.closeStores()
		return nil, err
	}
	rc := raftlog.RaftConfig(cfg.NodeID, cfg.Tuning, hlog)
	n.quarantine.hold(rc)
	n.raft, err = raft.NewRaft(rc, n.fsm, n.stores.Log, n.stores.Stable, n.stores.Snapshots, n.stores.Transport)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	n.m = newMetrics(cfg.Registry, n)
	if cfg.members != nil {
		n.members = cfg.members
		// judge this group's last check again when a peer's digest of it arrives
		n.members.watchGroupChecks(cfg.Group, func() { go n.compareChecks() })
	} else if cfg.GossipAddr != "" {
		adv := cfg.GossipAdvertise
		if adv == "" {
			adv = cfg.GossipAddr
		}
		self := meta{ID: cfg.NodeID, Raft: string(n.stores.Transport.LocalAddr()), HTTP: cfg.HTTPAdvertise,
			GRPC: cfg.GRPCAdvertise, Kafka: cfg.KafkaAdvertise, Expect: cfg.BootstrapExpect, Boot: n.raft.LastIndex() > 0, Resync: n.resyncing() != nil,
			Groups: groupsMeta(cfg.Groups)}
		n.members, err = startMembership(self, cfg.GossipAddr, adv, cfg.LocalGossip, cfg.GossipKeys, newStdLogger(cfg.Logger, "gossip"))
		if err != nil {
			n.Shutdown()
			return nil, err
		}
		n.ownsMembers = true
		n.wg.Add(1)
		go n.gossipLoop()
	}
	if err := n.maybeBootstrap(); err != nil {
		n.Shutdown()
		return nil, err
	}
	n.damage.OnFirst(n.onDamaged)
	if rs := n.resyncing(); rs != nil {
		if n.members != nil && !n.ownsMembers { // group 0 said so when it started gossip
			n.members.setResync(cfg.Group, true)
		}
		n.wg.Add(1)
		go n.resyncLoop(rs)
	}
	n.wg.Add(4)
	go n.watchLeaders()
	go n.watchLeadership()
	go n.snapshotLoop()
	go n.flushLoop()
	if cfg.ScrubRate > 0 {
		n.wg.Add(1)
		go n.scrubLoop()
	}
	return n, nil
}

// openFiles opens the state file, the message files, the FSM over them and
// the Raft stores; with a RESYNC marker it first sets the damaged state
// aside and then drops the log (resync.go).
func (n *Node) openFiles(marker *resyncMarker, fsmMetrics *fsm.Metrics, hlog hclog.Logger) error {
	cfg := n.cfg
	if marker != nil {
		kept, err := setAsideDamaged(cfg.DataDir)
		if err != nil {
			return err
		}
		n.log.Warn("resync: the damaged state is set aside; rebuilding it from the leader", "kept", kept,
			"where", marker.Where, "reason", marker.Reason)
	}
	var err error
	if n.db, n.msgs, err = openState(cfg.DataDir, cfg.NoSync, cfg.BootID, n.log); err != nil {
		return err
	}
	n.fsm, err = fsm.New(n.db, n.msgs, fsm.Options{LogID: fsm.GroupLogID(cfg.Group), Logger: cfg.Logger, Metrics: fsmMetrics, OnApplied: n.onApplied,
		AwaitSpace: n.disk.AwaitApply, Keys: cfg.Keys, Damage: n.damage, OnStateCheck: n.onStateCheck})
	if err != nil {
		n.db.Close()
		n.msgs.Close()
		return err
	}
	n.stores, err = raftlog.Open(raftlog.Config{
		Dir: filepath.Join(cfg.DataDir, "raft"), BindAddr: cfg.RaftAddr, Log: cfg.RaftLog, Layer: layerOf(cfg),
		AdvertiseAddr: cfg.RaftAdvertise, Logger: hlog, ServerTLS: serverTLS(cfg.PeerTLS), ClientTLS: clientTLS(cfg.PeerTLS),
		OnCorrupt:  func(err error) { n.damage.Note(damage.RaftLog, err) },
		CacheBytes: raftlog.CacheShare(0, cfg.Groups),
	})
	if err != nil {
		n.db.Close()
		n.msgs.Close()
		return err
	}
	if err := recordFormats(cfg.DataDir, n.stores.LogKind); err != nil {
		n.closeStores()
		return err
	}
	if marker != nil {
		if err := n.stores.DropLog(); err != nil {
			n.closeStores()
			return fmt.Errorf("cluster: resync: drop the log: %w", err)
		}
	}
	return nil
}

// scrubLoop checks the message files against their checksums in the
// background (package scrub) until the node stops.
func (n *Node) scrubLoop() {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-n.stop; cancel() }()
	scrub.New(n.msgs, scrub.Options{Pacer: n.pacer, Interval: n.cfg.ScrubInterval,
		Logger: n.log, Registry: n.cfg.Registry}).Run(ctx)
}

// openState opens the FSM's state file and message files. Their writes are
// not fsynced: the Raft log is the durable record, both are synced before
// every snapshot, and after a machine crash that may have torn them (the
// state file's session record decides: store.Options.DeferSync,
// store/session.go) both are set aside and rebuilt from the newest snapshot
// plus the log (fsm/DESIGN.md says why).
func openState(dir string, noSync bool, bootID string, log *slog.Logger) (*store.DB, *msgstore.Store, error) {
	db, err := store.Open(filepath.Join(dir, "fsm.db"), fsm.Buckets, store.Options{DeferSync: true, NoSync: noSync, BootID: bootID,
		CommitEvery: fsm.CommitEvery, CommitAfter: fsm.CommitAfter})
	if err != nil {
		return nil, nil, err
	}
	msgDir := filepath.Join(dir, "messages")
	if aside := db.SetAside(); aside != "" {
		kept := fmt.Sprintf("%s.set-aside-%d", msgDir, time.Now().UnixNano())
		if err := os.Rename(msgDir, kept); err != nil && !errors.Is(err, os.ErrNotExist) {
			db.Close()
			return nil, nil, fmt.Errorf("cluster: set the message files aside: %w", err)
		}
		log.Warn("state may be torn by a machine crash; rebuilding it from the snapshot and the log", "kept", aside, "messages", kept)
	}
	if err := msgstore.CleanUp(msgDir); err != nil {
		db.Close()
		return nil, nil, err
	}
	msgs, err := msgstore.Open(msgDir, msgstore.Options{})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, msgs, nil
}

// catchUpFromSnapshot restores the newest snapshot when the FSM file is
// older than it (the file was lost or replaced). Raft is started with
// NoSnapshotRestoreOnStart, so without this the node would replay only the
// log after the snapshot onto a state that lacks what came before.
func (n *Node) catchUpFromSnapshot() error {
	meta, rc, err := n.stores.LatestSnapshot()
	if err != nil {
		return fmt.Errorf("cluster: list snapshots: %w", err)
	}
	if meta == nil {
		return nil
	}
	if meta.Index <= n.fsm.AppliedIndex() {
		rc.Close()
		return nil
	}
	n.log.Warn("state file is behind the newest snapshot; restoring it",
		"applied", n.fsm.AppliedIndex(), "snapshot", meta.Index)
	return n.fsm.Restore(rc)
}

func (n *Node) closeStores() {
	if n.stores != nil {
		n.stores.Close()
	}
	if n.fsm != nil {
		if err := n.fsm.Flush(); err != nil {
			n.log.Warn("flushing the state file at close", "err", err)
		}
	}
	n.db.Close()
	n.msgs.Close()
}

// onApplied runs on the apply goroutine after each committed batch.
func (n *Node) onApplied(index uint64, ch fsm.Changes) {
	n.hub.notify(ch.Queues)
	n.parking.notify(ch.Queues)
	n.appliedMu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.lastApplyAt = time.Now()
	n.appliedMu.Unlock()
}

// sinceLastApply is how long ago, by the monotonic clock, this node applied
// the last batch; -1 when it has applied nothing since it started.
func (n *Node) sinceLastApply() time.Duration {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	if n.lastApplyAt.IsZero() {
		return -1
	}
	return time.Since(n.lastApplyAt)
}

// waitApplied blocks until the FSM has applied index (an index that
// reaches the FSM: see lastStateIndex), or ctx ends. It wakes on every
// applied batch.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		n.appliedMu.Lock()
		ch := n.appliedCh
		n.appliedMu.Unlock()
		if n.fsm.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ErrTimeout
		case <-n.stop:
			return ErrShutdown
		}
	}
}

// Now is the leader clock's current reading (µs), for judging deliverability
// outside apply. It never runs behind the last applied stamp.
func (n *Node) Now() int64 { return n.clock.read(n.fsm.LastNow()) }

// Watch returns a channel closed when an applied entry next changes queue
// of the tenant ctx carries ("" = any queue of any tenant).
func (n *Node) Watch(ctx context.Context, queue string) <-chan struct{} {
	if queue != "" {
		queue = fsm.QueueKey(tenantKey(ctx), queue)
	}
	return n.hub.watch(queue)
}

// NewLeaseID mints a lease id: a UUIDv7, so that the lease table's index by
// id grows at its end.
func NewLeaseID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// IsLeader reports whether Raft says this node leads now; it says nothing
// of whether the node has applied what earlier leaders committed.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Ready reports whether this node can serve: it knows a leader, and it is
// not far behind the commit index (a node still catching up after a
// restart answers /health with 503 until it has).
func (n *Node) Ready() bool {
	addr, _ := n.raft.LeaderWithID()
	return addr != "" && n.raft.AppliedIndex()+readyLag >= n.raft.CommitIndex()
}

// readyLag is how many entries behind the commit index a node may be and
// still call itself ready.
const readyLag = 1024

// Drain prepares a shutdown while the servers still run: parked long-poll
// pops answer empty at once (so an HTTP server shutting down does not wait
// for them), and a leader hands leadership to another voter, so that
// requests forwarded here meanwhile get "not the leader" and go to the new
// leader instead of failing with the stopping servers. Writes keep working.
func (n *Node) Drain() {
	n.drainOnce.Do(func() {
		close(n.draining)
		if n.members != nil {
			n.members.setStopping() // the other nodes' balancers pass it over from now on
		}
		n.transferLeadership("before shutdown")
	})
}

// Draining is closed once Drain was called: long-lived streams (the gRPC
// Consume) end on it, so that a graceful server stop does not wait for them.
func (n *Node) Draining() <-chan struct{} { return n.draining }

// Shutdown stops the node: the leader loops, Raft, then the files.
func (n *Node) Shutdown() error {
	var err error
	n.shutdown.Do(func() {
		n.Drain()
		close(n.stop)
		n.disk.Close()
		n.wg.Wait()
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		if n.ownsMembers {
			n.members.shutdown()
		}
		n.closeStores()
	})
	return err
}

// Kill stops the node the way a crash would, as far as the others can tell:
// no leadership transfer, no gossip leave. In-process tests use it where
// process tests use kill -9.
func (n *Node) Kill() {
	n.shutdown.Do(func() {
		n.drainOnce.Do(func() { close(n.draining) }) // no leadership transfer
		close(n.stop)
		n.disk.Close()
		n.wg.Wait()
		n.raft.Shutdown().Error()
		if n.ownsMembers {
			n.members.ml.Shutdown()
		}
		n.closeStores()
	})
}

// transferLeadership hands leadership to another voter, when this node
// leads, so the cluster does not wait out an election timeout: before it
// stops, and when it found its own files damaged (a replica with intact
// files should lead). why names the occasion in the log.
func (n *Node) transferLeadership(why string) {
	if n.raft == nil || n.raft.State() != raft.Leader {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil || len(f.Configuration().Servers) < 2 {
		return
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := n.raft.LeadershipTransfer().Error()
		if err == nil {
			n.awaitNewLeader()
			n.log.Info("transferred leadership "+why, "took", time.Since(start), "attempts", attempt)
			return
		}
		// A loaded machine can miss one transfer's election timeout, or
		// find the chosen voter a moment behind; a stop is worth a few
		// more tries, since without one the cluster waits out an election.
		if attempt == transferAttempts || n.raft.State() != raft.Leader {
			n.log.Warn("leadership transfer "+why+" failed", "err", err, "attempts", attempt)
			return
		}
		time.Sleep(transferRetryPause)
	}
}

// awaitNewLeader waits, at most handoverWait, until this node has heard
// from the voter it handed leadership to as the new leader. A transfer is
// done when that voter got TimeoutNow, before its election; a node that
// stopped right then would leave in its old term, and the new leader's vote
// request and first heartbeat would find it gone (a CI run saw exactly
// that). Stepping down is not enough either: a reply with a newer term
// makes raft step down before it learns the term.
func (n *Node) awaitNewLeader() {
	deadline := time.Now().Add(handoverWait)
	for time.Now().Before(deadline) {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.NodeID {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handoverWait bounds how long a leader that handed over waits to hear
// from the new one.
const handoverWait = 2 * time.Second

// transferAttempts bounds the handovers a stopping leader tries, each
// waiting at most an election timeout, transferRetryPause apart.
const (
	transferAttempts   = 3
	transferRetryPause = 50 * time.Millisecond
)

// SetClockSkew shifts the wall clock this node's stamp clock reads (when it
// anchors, and as the target it slews towards). Fault tests use it to
// simulate a clock that jumps.
func (n *Node) SetClockSkew(d time.Duration) { n.clock.setSkew(d) }

// StepDown hands leadership to another voter (fault tests, operators).
func (n *Node) StepDown() error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	return n.raft.LeadershipTransfer().Error()
}

// Snapshot forces a snapshot (tests, operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// LeaseIDFor returns id, or a new lease id when id is empty.
func LeaseIDFor(id string) string {
	if id != "" {
		return id
	}
	return NewLeaseID()
}

// SnapshotWithTrailing takes a snapshot and truncates the log down to
// `trailing` entries behind it (tests force InstallSnapshot with it).
func (n *Node) SnapshotWithTrailing(trailing uint64) error {
	old := n.raft.ReloadableConfig()
	cfg := old
	cfg.TrailingLogs = trailing
	if err := n.raft.ReloadConfig(cfg); err != nil {
		return err
	}
	defer n.raft.ReloadConfig(old)
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return err
	}
	return nil
}

func serverTLS(p *tlsfiles.Peer) *tls.Config {
	if p == nil {
		return nil
	}
	return p.ServerConfig()
}

func clientTLS(p *tlsfiles.Peer) *tls.Config {
	if p == nil {
		return nil
	}
	return p.ClientConfig()
}

// layerOf is a new stream layer of cfg's group on the mux, or nil (a
// listener of its own).
func layerOf(cfg Config) raft.StreamLayer {
	if cfg.Layer == nil {
		return nil
	}
	return cfg.Layer()
}
