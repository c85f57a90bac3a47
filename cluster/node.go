package cluster

import (
	"context"
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
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/store"
)

// Config configures a Node. Zero values mean the defaults.
type Config struct {
	NodeID        string
	DataDir       string
	RaftAddr      string // bind address of the Raft transport
	RaftAdvertise string // address other nodes dial; "" = RaftAddr
	// BootstrapExpect: 1 bootstraps a one-voter cluster on first start.
	BootstrapExpect int
	Logger          *slog.Logger
	Registry        prometheus.Registerer
	Tuning          raftlog.Tuning
	ApplyTimeout    time.Duration // longest wait for one apply; default 10s
	SweepInterval   time.Duration // leader's sweep period; default 2s
	SweepLimit      uint32        // work per sweep entry; default 1000
	NoSync          bool          // skip fsync of the FSM file (throwaway tests only)
}

// Node is one queen-node: Raft plus the FSM plus the leader's loops.
type Node struct {
	cfg    Config
	log    *slog.Logger
	db     *store.DB
	fsm    *fsm.FSM
	stores *raftlog.Stores
	raft   *raft.Raft
	clock  *stampClock
	hub    *hub
	m      *metrics

	appliedMu sync.Mutex
	appliedCh chan struct{} // closed and replaced after every applied batch

	ready atomic.Bool // leader, and every entry of earlier terms is applied

	inflight sync.Map // Idempotency-Keys of commands being applied here

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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("component", "node", "node", cfg.NodeID),
		clock: newStampClock(), hub: newHub(), appliedCh: make(chan struct{}),
		stop: make(chan struct{}), draining: make(chan struct{}),
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	var err error
	if n.db, err = openState(filepath.Join(cfg.DataDir, "fsm.db"), cfg.NoSync, n.log); err != nil {
		return nil, err
	}
	fsmMetrics := fsm.NewMetrics(cfg.Registry)
	n.fsm, err = fsm.New(n.db, fsm.Options{Logger: cfg.Logger, Metrics: fsmMetrics, OnApplied: n.onApplied})
	if err != nil {
		n.db.Close()
		return nil, err
	}
	hlog := newHCLogger(cfg.Logger, "raft")
	n.stores, err = raftlog.Open(raftlog.Config{
		Dir: filepath.Join(cfg.DataDir, "raft"), BindAddr: cfg.RaftAddr,
		AdvertiseAddr: cfg.RaftAdvertise, Logger: hlog,
	})
	if err != nil {
		n.db.Close()
		return nil, err
	}
	if err := n.catchUpFromSnapshot(); err != nil {
		n.closeStores()
		return nil, err
	}
	rc := raftlog.RaftConfig(cfg.NodeID, cfg.Tuning, hlog)
	n.raft, err = raft.NewRaft(rc, n.fsm, n.stores.Log, n.stores.Stable, n.stores.Snapshots, n.stores.Transport)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	n.m = newMetrics(cfg.Registry, n)
	if err := n.maybeBootstrap(); err != nil {
		n.Shutdown()
		return nil, err
	}
	n.wg.Add(1)
	go n.watchLeadership()
	return n, nil
}

// openState opens the FSM's file. Its commits are not fsynced: the Raft log
// is the durable record, the file is synced before every snapshot, and a
// file a machine crash may have torn is set aside and rebuilt from the
// newest snapshot plus the log (see store.Trusted and fsm/DESIGN.md).
func openState(path string, noSync bool, log *slog.Logger) (*store.DB, error) {
	opts := store.Options{DeferSync: true, NoSync: noSync}
	db, err := store.Open(path, fsm.Buckets, opts)
	if err != nil {
		return nil, err
	}
	if db.Trusted() {
		return db, nil
	}
	db.Close()
	aside, err := store.Discard(path)
	if err != nil {
		return nil, err
	}
	log.Warn("state file may be torn by a machine crash; rebuilding it from the snapshot and the log", "kept", aside)
	return store.Open(path, fsm.Buckets, opts)
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

func (n *Node) maybeBootstrap() error {
	if n.cfg.BootstrapExpect != 1 {
		return nil
	}
	has, err := n.stores.HasState()
	if err != nil || has {
		return err
	}
	cfg := raft.Configuration{Servers: []raft.Server{{
		ID: raft.ServerID(n.cfg.NodeID), Address: n.stores.Transport.LocalAddr(), Suffrage: raft.Voter,
	}}}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	n.log.Info("bootstrapped a one-voter cluster")
	return nil
}

func (n *Node) closeStores() {
	if n.stores != nil {
		n.stores.Close()
	}
	n.db.Close()
}

// onApplied runs on the apply goroutine after each committed batch.
func (n *Node) onApplied(index uint64, ch fsm.Changes) {
	n.hub.notify(ch.Queues)
	n.appliedMu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.appliedMu.Unlock()
}

// waitApplied blocks until this node has applied index, or ctx ends. It
// compares with Raft's applied index, which also counts the entries the FSM
// never sees (no-ops, barriers), and wakes on every applied batch, with a
// short tick for the entries that wake nothing.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	var tick *time.Ticker
	for {
		n.appliedMu.Lock()
		ch := n.appliedCh
		n.appliedMu.Unlock()
		if n.raft.AppliedIndex() >= index {
			if tick != nil {
				tick.Stop()
			}
			return nil
		}
		if tick == nil {
			tick = time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ErrTimeout
		case <-n.stop:
			return ErrShutdown
		}
	}
}

// watchLeadership starts the leader's loops when this node wins an election
// and stops them when it loses leadership.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	var stopLeader chan struct{}
	var leaderDone sync.WaitGroup
	end := func() {
		if stopLeader != nil {
			close(stopLeader)
			leaderDone.Wait()
			stopLeader = nil
		}
		n.ready.Store(false)
	}
	defer end()
	for {
		select {
		case isLeader := <-n.raft.LeaderCh():
			end()
			if isLeader {
				stopLeader = make(chan struct{})
				leaderDone.Add(1)
				go func(stop chan struct{}) {
					defer leaderDone.Done()
					n.leaderLoop(stop)
				}(stopLeader)
			}
		case <-n.stop:
			return
		}
	}
}

// leaderLoop is everything a leader does on its own: confirm that entries
// of earlier terms are applied (until then linearizable reads wait), then
// propose sweeps. It retries forever and ends only when leadership does
// (DESIGN.md, traps: a refused write must not stop the loop).
func (n *Node) leaderLoop(stop chan struct{}) {
	n.clock.anchor(n.fsm.LastNow())
	for {
		if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err == nil {
			break
		} else {
			n.log.Warn("leader barrier failed; retrying", "err", err)
		}
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	n.ready.Store(true)
	n.log.Info("leading", "term", n.raft.CurrentTerm(), "applied", n.fsm.AppliedIndex())
	tick := time.NewTicker(n.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			n.sweep(stop)
		}
	}
}

// sweep proposes sweep entries while the state has something expired.
func (n *Node) sweep(stop chan struct{}) {
	for i := 0; i < 100; i++ {
		due := false
		_ = n.fsm.Read(func(r *fsm.Reader) error { due = r.SweepDue(n.clock.read()); return nil })
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &fsmpb.Command{Body: &fsmpb.Command_Sweep{Sweep: &fsmpb.Sweep{Limit: n.cfg.SweepLimit}}})
		cancel()
		if err != nil {
			n.log.Warn("sweep failed; will retry", "err", err)
			return
		}
		if r, ok := res.(*fsmpb.SweepResult); !ok || !r.More {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// Apply turns cmd into one log entry and returns the FSM's result for it.
// The result is this entry's own apply result (never "index N committed").
func (n *Node) Apply(ctx context.Context, cmd *fsmpb.Command) (proto.Message, error) {
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	return n.applyLocal(ctx, cmd)
}

func (n *Node) notLeader() error {
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return ErrNoLeader
	}
	return ErrNotLeader
}

func (n *Node) applyLocal(ctx context.Context, cmd *fsmpb.Command) (proto.Message, error) {
	select {
	case <-n.stop:
		return nil, ErrShutdown
	default:
	}
	if idem := cmd.Idempotency; idem != nil && idem.Key != "" {
		if _, busy := n.inflight.LoadOrStore(idem.Key, struct{}{}); busy {
			return nil, ErrInFlight
		}
		defer n.inflight.Delete(idem.Key)
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, ErrTimeout
	}
	cmd.StampUs = n.clock.next(n.fsm.LastNow())
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode command: %w", err)
	}
	start := time.Now()
	f := n.raft.Apply(data, timeout)
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
	if err := f.Error(); err != nil {
		mapped := mapRaftError(err)
		n.m.applyErrors.WithLabelValues(errLabel(mapped)).Inc()
		return nil, mapped
	}
	n.m.applySeconds.Observe(time.Since(start).Seconds())
	switch r := f.Response().(type) {
	case *fsmpb.Response:
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
	// started: the leader confirms it still leads, then waits until it has
	// applied the commit index it saw (Raft §6.4).
	Linearizable ReadLevel = iota
	// Stale reads answer from this node's state as it is.
	Stale
)

// Read runs fn over a consistent view of the state at the given level.
func (n *Node) Read(ctx context.Context, level ReadLevel, fn func(*fsm.Reader) error) error {
	if level == Linearizable {
		if err := n.readBarrier(ctx); err != nil {
			return err
		}
	}
	return n.fsm.Read(fn)
}

func (n *Node) readBarrier(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	for !n.ready.Load() {
		select {
		case <-ctx.Done():
			return ErrTimeout
		case <-n.stop:
			return ErrShutdown
		case <-time.After(5 * time.Millisecond):
		}
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
	}
	index := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return n.notLeader()
	}
	return n.waitApplied(ctx, index)
}

// Now is the leader clock's current reading (µs), for judging deliverability
// outside apply. It never runs behind the last applied stamp.
func (n *Node) Now() int64 { return max(n.clock.read(), n.fsm.LastNow()) }

// Watch returns a channel closed when an applied entry next changes queue
// ("" = any queue).
func (n *Node) Watch(queue string) <-chan struct{} { return n.hub.watch(queue) }

// NewLeaseID mints a lease id.
func NewLeaseID() string { return uuid.NewString() }

// IsLeader reports whether this node leads and has applied earlier terms.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Ready reports whether this node can serve writes.
func (n *Node) Ready() bool {
	addr, _ := n.raft.LeaderWithID()
	return addr != ""
}

// Drain makes parked long-poll pops answer empty at once, so that an HTTP
// server shutting down does not wait for them. Writes keep working.
func (n *Node) Drain() { n.drainOnce.Do(func() { close(n.draining) }) }

// Shutdown stops the node: the leader loops, Raft, then the files.
func (n *Node) Shutdown() error {
	var err error
	n.shutdown.Do(func() {
		n.Drain()
		close(n.stop)
		n.wg.Wait()
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		n.closeStores()
	})
	return err
}

// SetClockSkew shifts the wall clock this node anchors its stamps to when it
// next becomes leader. Fault tests use it to simulate a jumping clock.
func (n *Node) SetClockSkew(d time.Duration) { n.clock.setSkew(d) }

// Snapshot forces a snapshot (tests, operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// hclog bridge: Raft logs through our slog handler, at warn and above by
// default so that a healthy node stays quiet.
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: name, Level: hclog.Warn, Output: slogWriter{l.With("component", name)},
		DisableTime: true,
	})
}

type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && (msg[len(msg)-1] == '\n') {
		msg = msg[:len(msg)-1]
	}
	w.l.Info(msg)
	return len(p), nil
}

// LeaseIDFor returns id, or a new lease id when id is empty.
func LeaseIDFor(id string) string {
	if id != "" {
		return id
	}
	return NewLeaseID()
}
