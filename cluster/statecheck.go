package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/store"
)

// State checks compare the replicas' state files with one another (the
// state file's content check; DESIGN.md, "Damaged files"). bbolt's pages
// carry no checksum, so a flipped bit in a value is read back as it is; but
// replicas that applied the same log to the same index hold the same
// state. The leader appends a state_check entry (every scrub interval, and
// soon after a node (re)starts: the check "at open"); every replica, at
// that entry, pins a view of its state and digests it in the background at
// the scrub's bounded rate; it publishes the digest's first 16 hex digits
// in gossip with the index; and a replica whose digest differs from one a
// majority of the voters agree on knows its own file is damaged and says
// so (package damage), which starts its recovery (resync.go).

// checkHexDigits of the digest go into gossip: 64 bits tell damage from
// intact state; gossip metadata is small.
const checkHexDigits = 16

// checkAgain: the leader proposes a check for a node that has none at most
// this often (a node restored from a snapshot past the last check has none
// until the next).
const checkAgain = 10 * time.Second

type stateChecks struct {
	limit *rate.Limiter // nil: unbounded

	mu       sync.Mutex
	running  bool
	index    uint64 // of this node's last finished check
	digest   string // its first checkHexDigits hex digits
	judged   uint64 // the last index this node found itself damaged at
	warned   map[string]uint64
	proposed time.Time // the leader's last check proposal

	checks   *prometheus.CounterVec
	bytes    prometheus.Counter
	lastDone prometheus.Gauge
}

func newStateChecks(bytesPerSecond float64, reg prometheus.Registerer) *stateChecks {
	c := &stateChecks{warned: map[string]uint64{},
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "queen", Subsystem: "state_check", Name: "total",
			Help: "State checks this node took part in, by result: match (a majority of the voters agree with its digest), " +
				"damaged (a majority agree on another: this node's state file is damaged), peer_differs (a voter's digest differs from this node's and the majority's)."},
			[]string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "queen", Subsystem: "state_check", Name: "bytes_total",
			Help: "Bytes of the state file digested by state checks."}),
		lastDone: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "queen", Subsystem: "state_check", Name: "last_index",
			Help: "The log index of the last state check this node digested its state file at."}),
	}
	if bytesPerSecond > 0 {
		c.limit = rate.NewLimiter(rate.Limit(bytesPerSecond), max(int(bytesPerSecond), 64<<10))
	}
	for _, r := range []string{"match", "damaged", "peer_differs"} {
		c.checks.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(c.checks, c.bytes, c.lastDone)
	}
	return c
}

// onStateCheck is fsm.Options.OnStateCheck: digest view in the background.
func (n *Node) onStateCheck(index uint64, view store.Reader, release func()) {
	c := n.checks
	c.mu.Lock()
	busy := c.running || n.members == nil
	c.running = !busy
	c.mu.Unlock()
	if busy {
		release() // the check before is still digesting; this one is passed over
		return
	}
	pinsEnd := n.db.PinsEnd()
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-n.stop:
				cancel()
			case <-pinsEnd: // a snapshot is being installed: let it in, drop this check
				cancel()
			case <-ctx.Done():
			}
		}()
		var digest string
		err := store.Checked(func() error {
			digest = fsm.CheckDigest(view, &limitedWriter{ctx: ctx, limit: c.limit, count: c.bytes})
			return nil
		})
		release()
		if err != nil { // a record failed its checksum on the way
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
			n.damage.Note(damage.StateFile, err)
			return
		}
		c.mu.Lock()
		c.running = false
		if ctx.Err() == nil {
			c.index, c.digest = index, digest[:checkHexDigits]
		}
		c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		c.lastDone.Set(float64(index))
		n.members.setCheck(index, digest[:checkHexDigits])
		n.compareChecks()
	}()
}

// compareChecks judges this node's last check against the digests the
// voters published for the same index (gossip). It runs after every check
// and on every gossip change.
func (n *Node) compareChecks() {
	c := n.checks
	c.mu.Lock()
	index, own := c.index, c.digest
	c.mu.Unlock()
	if index == 0 || n.members == nil {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters[string(s.ID)] = true
		}
	}
	digests := map[string]string{}
	if voters[n.cfg.NodeID] {
		digests[n.cfg.NodeID] = own
	}
	for _, m := range n.members.list() {
		if m.ID != n.cfg.NodeID && voters[m.ID] && m.Check == index && m.CheckHash != "" {
			digests[m.ID] = m.CheckHash
		}
	}
	agree := map[string]int{}
	for _, d := range digests {
		agree[d]++
	}
	quorum := len(voters)/2 + 1
	for d, count := range agree {
		if count < quorum {
			continue
		}
		if d != own {
			c.mu.Lock()
			first := c.judged != index
			c.judged = index
			c.mu.Unlock()
			if first {
				c.checks.WithLabelValues("damaged").Inc()
				n.damage.Note(damage.StateFile, fmt.Errorf("state check at log index %d: this node's state file digests to %s, %d of the %d voters' to %s",
					index, own, count, len(voters), d))
			}
			return
		}
		if len(digests) == len(voters) {
			n.noteCheckMatch(index)
		}
		for id, pd := range digests {
			if pd != own && n.warnPeerOnce(id, index) {
				c.checks.WithLabelValues("peer_differs").Inc()
				n.log.Error("a voter's state file differs from the majority's at a state check: its file is damaged",
					"peer", id, "index", index, "its_digest", pd, "majority_digest", own)
			}
		}
	}
}

func (n *Node) noteCheckMatch(index uint64) {
	if n.warnPeerOnce(n.cfg.NodeID, index) {
		n.checks.checks.WithLabelValues("match").Inc()
	}
}

// warnPeerOnce reports whether id was not yet reported at index (and
// records that it now is).
func (n *Node) warnPeerOnce(id string, index uint64) bool {
	c := n.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[id] >= index {
		return false
	}
	c.warned[id] = index
	return true
}

// proposeStateCheck, on the leader, appends a state check when due: every
// interval, and for a live voter that published none yet (it started
// since), at most once per checkAgain.
func (n *Node) proposeStateCheck(stop chan struct{}, due bool) {
	if n.members == nil || n.cfg.ScrubRate <= 0 {
		return
	}
	c := n.checks
	c.mu.Lock()
	recent := time.Since(c.proposed) < checkAgain
	c.mu.Unlock()
	if recent {
		return
	}
	if !due {
		due = n.voterWithoutCheck()
	}
	if !due {
		return
	}
	c.mu.Lock()
	c.proposed = time.Now()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if _, err := n.applyLocal(ctx, &command.Command{Skippable: true,
		Body: &command.Command_StateCheck{StateCheck: &command.StateCheck{}}}); err != nil {
		n.log.Debug("state check proposal failed; the next tick retries", "err", err)
	}
}

// voterWithoutCheck reports whether a live voter published no state check
// yet (it started since the last one).
func (n *Node) voterWithoutCheck() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		voters[string(s.ID)] = s.Suffrage == raft.Voter
	}
	for _, m := range n.members.list() {
		if m.Alive && voters[m.ID] && m.Check == 0 && !m.Resync {
			return true
		}
	}
	return false
}

// limitedWriter counts what a digest reads and holds it to the limit; once
// ctx ends it waits no more (the digest finishes at once and is dropped).
type limitedWriter struct {
	ctx   context.Context
	limit *rate.Limiter
	count prometheus.Counter
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.count.Add(float64(len(p)))
	if w.limit != nil && w.ctx.Err() == nil {
		for rest := len(p); rest > 0; {
			take := min(rest, w.limit.Burst())
			if w.limit.WaitN(w.ctx, take) != nil {
				break
			}
			rest -= take
		}
	}
	return len(p), nil
}

// scrubInterval is the pause between scrub passes and between state
// checks (Config.ScrubInterval; 0 = 1 hour).
func (n *Node) scrubInterval() time.Duration {
	if n.cfg.ScrubInterval > 0 {
		return n.cfg.ScrubInterval
	}
	return time.Hour
}
