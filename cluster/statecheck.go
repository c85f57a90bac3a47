package cluster

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

func newStateChecks(reg prometheus.Registerer) *stateChecks {
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
	for _, r := range []string{"match", "damaged", "peer_differs"} {
		c.checks.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(c.checks, c.bytes, c.lastDone)
	}
	return c
}

// onStateCheck is fsm.Options.OnStateCheck: digest view in the background,
// at the pace the message scrub shares (n.pacer; unpaced without one).
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
		defer func() {
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-n.stop:
			case <-pinsEnd: // a snapshot is being installed: let it in, drop this check
			case <-ctx.Done():
			}
			cancel()
		}()
		var sink io.Writer = counted{c.bytes}
		if n.pacer != nil {
			sink = io.MultiWriter(sink, n.pacer.Writer(ctx))
		}
		var digest string
		err := store.Checked(func() error { digest = fsm.CheckDigest(view, sink); return nil })
		release()
		switch {
		case err != nil: // a record failed its checksum on the way
			n.damage.Note(damage.StateFile, err)
			return
		case ctx.Err() != nil:
			return
		}
		digest = digest[:checkHexDigits]
		c.mu.Lock()
		c.index, c.digest = index, digest
		c.mu.Unlock()
		c.lastDone.Set(float64(index))
		switch {
		case n.ownsMembers: // group 0's digest rides in gossip metadata
			n.members.setCheck(index, digest)
		case n.members != nil: // another group's in a message (groupchecks.go)
			n.members.setChecked(n.cfg.Group)
			n.members.publishGroupCheck(n.cfg.Group, index, digest)
		}
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
	voters, ok := n.currentVoters()
	if !ok {
		return
	}
	digests := map[string]string{}
	if voters[n.cfg.NodeID] {
		digests[n.cfg.NodeID] = own
	}
	for _, m := range n.members.list() {
		if at, d := n.members.checkOf(m, n.cfg.Group); m.ID != n.cfg.NodeID && voters[m.ID] && at == index && d != "" {
			digests[m.ID] = d
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
				if !n.ownsMembers && n.members != nil {
					n.members.resendGroupChecksTo(id) // so that it can judge itself
				}
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
func (n *Node) proposeStateCheck(due bool) {
	if n.members == nil || n.cfg.ScrubRate <= 0 {
		return
	}
	c := n.checks
	c.mu.Lock()
	recent := time.Since(c.proposed) < checkAgain
	c.mu.Unlock()
	if recent || !(due || n.voterWithoutCheck()) {
		return
	}
	c.mu.Lock()
	c.proposed = time.Now()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.applyLocal(ctx, &command.Command{Skippable: true,
		Body: &command.Command_StateCheck{StateCheck: &command.StateCheck{}}}); err != nil {
		n.log.Debug("state check proposal failed; the next tick retries", "err", err)
	}
}

// voterWithoutCheck reports whether a live voter published no state check
// yet (it started since the last one).
func (n *Node) voterWithoutCheck() bool {
	voters, _ := n.currentVoters()
	for _, m := range n.members.list() {
		if m.Alive && voters[m.ID] && !m.checkedIn(n.cfg.Group) && !m.resyncIn(n.cfg.Group) {
			return true
		}
	}
	return false
}

// counted is a sink that counts the bytes written to it.
type counted struct{ c prometheus.Counter }

func (w counted) Write(b []byte) (int, error) { w.c.Add(float64(len(b))); return len(b), nil }

// scrubInterval is the pause between scrub passes and between state
// checks (Config.ScrubInterval; 0 = 1 hour).
func (n *Node) scrubInterval() time.Duration {
	if n.cfg.ScrubInterval > 0 {
		return n.cfg.ScrubInterval
	}
	return time.Hour
}
