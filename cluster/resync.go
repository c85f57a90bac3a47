package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/raftlog"
)

// Recovery of a damaged replica from the others (DESIGN.md, "Recovery from
// the peers"). A node that found its own files damaged may have lost
// entries it acknowledged, so until it holds every committed entry again it
// must neither vote nor stand for election: its vote could elect a peer
// that lacks a committed entry. The steps:
//
//  1. The node that finds damage (package damage) hands leadership over if
//     it leads, writes the RESYNC marker, stops Raft (from here on it votes
//     no more) and asks its process to restart (Config.OnResync).
//  2. At start, the marker sets the damaged state aside (fsm.db, messages/,
//     the snapshots, the log, into damaged/) keeping the stable store (its
//     term and vote), and starts Raft quarantined: its transport refuses
//     every vote, pre-vote and leadership transfer (raftlog.Quarantine) and
//     its heartbeat timeout is too long to ever stand. Gossip says resync.
//  3. The leader, seeing resync in gossip, demotes it to a non-voter
//     (reconcile) and replicates to it: its snapshot, then its log.
//  4. Once this node's configuration names it a non-voter, committed, and
//     it has applied up to the commit index it learned after that, it
//     removes the marker, lifts the quarantine and says so in gossip; the
//     leader promotes it back to a voter.
//
// With no leader reachable the node stays at step 2 and says why
// (/health). A node that is the only voter has nothing to rebuild from: it
// keeps its files, serves what is intact and refuses what is damaged.

const resyncFile = "RESYNC"

// resyncMarker is what RESYNC holds: the damage that started the resync.
type resyncMarker struct {
	Where  string    `json:"where"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// resyncState is a resyncing node's progress (nil on a node that is not).
type resyncState struct {
	marker resyncMarker
	since  time.Time

	mu     sync.Mutex
	phase  string
	target uint64 // the commit index to reach, once demoted
}

// ResyncStatus is what /health says of a resyncing node.
type ResyncStatus struct {
	Phase  string
	Since  time.Time
	Target uint64 // the commit index it catches up to (0 until demoted)
}

// quarantine keeps a node from voting and from standing for election: its
// transport refuses votes, pre-votes and leadership transfers, and its
// heartbeat timeout is too long to ever time out into a candidacy.
type quarantine struct {
	on                  atomic.Bool
	heartbeat, election time.Duration // the timeouts to restore
}

// quarantineTimeout is the heartbeat and election timeout of a quarantined
// node.
const quarantineTimeout = 24 * time.Hour

func newQuarantine(t *raftlog.Transport) *quarantine {
	q := &quarantine{}
	q.on.Store(true)
	t.Quarantine(q.on.Load)
	return q
}

// hold sets rc's timeouts for the quarantine, keeping the real ones.
func (q *quarantine) hold(rc *raft.Config) {
	if q == nil {
		return
	}
	q.heartbeat, q.election = rc.HeartbeatTimeout, rc.ElectionTimeout
	rc.HeartbeatTimeout, rc.ElectionTimeout = quarantineTimeout, quarantineTimeout
}

// lift ends the quarantine: votes are answered again and the timeouts are
// the real ones.
func (q *quarantine) lift(n *Node) {
	if q == nil || !q.on.Load() {
		return
	}
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = q.heartbeat, q.election
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Error("restoring the heartbeat timeout after the quarantine", "err", err)
	}
	q.on.Store(false)
}

func readResyncMarker(dir string) (*resyncMarker, error) {
	b, err := os.ReadFile(filepath.Join(dir, resyncFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: read %s: %w", resyncFile, err)
	}
	var m resyncMarker
	if err := json.Unmarshal(b, &m); err != nil {
		// a marker torn by a crash still says: resync
		m = resyncMarker{Where: "unknown", Reason: "the RESYNC marker is unreadable: " + err.Error(), At: time.Now()}
	}
	return &m, nil
}

// writeResyncMarker makes the marker durable before Raft stops: a crash
// from here on still resyncs at the next start.
func writeResyncMarker(dir string, f damage.Finding) error {
	b, err := json.Marshal(resyncMarker{Where: f.Where, Reason: f.Reason, At: f.At})
	if err != nil {
		return err
	}
	return writeSynced(filepath.Join(dir, resyncFile), b)
}

func removeResyncMarker(dir string) error {
	if err := os.Remove(filepath.Join(dir, resyncFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(dir)
}

// setAsideDamaged moves the state a resync rebuilds into dir/damaged/<time>
// (one copy kept, for an operator to look at; an older one is removed):
// the state file, the message files, the snapshots and the log. The
// stable store (raft/raft.db: the term and the vote) stays; a log kept in
// it (--raft-log bolt) is dropped once it is open (raftlog.DropLog).
func setAsideDamaged(dir string) (string, error) {
	root := filepath.Join(dir, "damaged")
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	kept := filepath.Join(root, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.MkdirAll(kept, 0o755); err != nil {
		return "", err
	}
	for _, p := range []string{"fsm.db", "messages", filepath.Join("raft", "snapshots"), filepath.Join("raft", "wal")} {
		err := os.Rename(filepath.Join(dir, p), filepath.Join(kept, filepath.Base(p)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("cluster: set %s aside: %w", p, err)
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, "raft"), kept} {
		if err := syncDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return kept, nil
}

// checkLogAtOpen checks every entry of the log (raftlog.CheckLog), the
// newest snapshot's checksum, and that the log still reaches the entries
// the state file holds: raft-wal drops a tail whose commit frame fails its
// checksum as if a crash had torn it, so a flipped bit there would
// silently cut entries this node acknowledged. Damage found is reported (package damage). It returns the
// latest configuration the log and snapshots hold.
func (n *Node) checkLogAtOpen() (raft.Configuration, error) {
	conf, err := n.stores.CheckLog()
	if err != nil {
		return conf, err
	}
	last, err := n.stores.Log.LastIndex()
	if err != nil {
		return conf, err
	}
	snap, err := n.stores.CheckSnapshot()
	if err != nil {
		n.damage.Note(damage.Snapshot, err)
		return conf, err
	}
	last = max(last, snap)
	if applied := n.fsm.AppliedIndex(); applied > last {
		err := fmt.Errorf("the raft log and snapshots end at index %d but the state file holds entries up to %d: the log lost entries this node had", last, applied)
		n.damage.Note(damage.RaftLog, err)
		return conf, err
	}
	return conf, nil
}

// resyncAtOpen turns damage the log's check at open found into a resync
// before Raft starts (Raft's own start reads the log, and stops the
// process at an entry it cannot read): the marker is written and the node
// opens its files again, the damaged ones set aside (the caller closed
// what it had opened). The only voter has nothing to rebuild from and
// refuses to start, saying why.
func (n *Node) resyncAtOpen(conf raft.Configuration, found error, reopen func(*resyncMarker) error) (*resyncMarker, error) {
	if !otherVoterIn(votersIn(conf), n.cfg.NodeID) {
		return nil, fmt.Errorf("cluster: this node's files are damaged (%v) and this node is the only voter: there is no replica to rebuild them from; "+
			"restore a backup (README, \"Damaged files\")", found)
	}
	f, _, ok := n.damage.Damaged()
	if !ok {
		f = damage.Finding{Where: damage.RaftLog, Reason: found.Error(), At: time.Now()}
	}
	if err := writeResyncMarker(n.cfg.DataDir, f); err != nil {
		return nil, fmt.Errorf("cluster: write the RESYNC marker: %w", err)
	}
	m := &resyncMarker{Where: f.Where, Reason: f.Reason, At: f.At}
	n.log.Warn("this node's files are damaged; it rebuilds its state from the leader", "where", f.Where, "err", found)
	return m, reopen(m)
}

// resyncDamagedState turns a state file that does not open for damage
// (store.Damaged: a record of its meta fails its checksum, bbolt's meta
// pages are invalid) into a resync, reading the configuration from the
// Raft stores, opened without a transport.
func (n *Node) resyncDamagedState(found error, hlog hclog.Logger, reopen func(*resyncMarker) error) (*resyncMarker, error) {
	n.damage.Note(damage.StateFile, found)
	stores, err := raftlog.Open(raftlog.Config{Dir: filepath.Join(n.cfg.DataDir, "raft"), Log: n.cfg.RaftLog, Logger: hlog, NoTransport: true})
	if err != nil {
		return nil, fmt.Errorf("%w (and the raft stores do not open to tell whether other voters hold the state: %v)", found, err)
	}
	conf, _ := stores.CheckLog()
	stores.Close()
	return n.resyncAtOpen(conf, found, reopen)
}

// onDamaged is what a node does with the first damage it finds (step 1).
func (n *Node) onDamaged(f damage.Finding) {
	n.transferLeadership("from a leader that found its own files damaged (" + f.Where + ")")
	if n.resyncing() != nil {
		return // already rebuilding: the damage is in what it set aside or is receiving
	}
	if !n.hasOtherVoter() {
		n.log.Error("this node found its files damaged and is the only voter: there is no replica to rebuild from; "+
			"it serves what is intact and refuses what is damaged (restore a backup to repair it)", "where", f.Where)
		return
	}
	if err := writeResyncMarker(n.cfg.DataDir, f); err != nil {
		n.log.Error("cannot write the RESYNC marker; the node stays up serving what is intact", "err", err)
		return
	}
	n.log.Warn("this node found its files damaged: it stops voting and restarts to rebuild its state from the leader",
		"where", f.Where, "reason", f.Reason)
	if err := n.raft.Shutdown().Error(); err != nil {
		n.log.Warn("stopping raft for the resync", "err", err)
	}
	if n.cfg.OnResync != nil {
		go n.cfg.OnResync()
	}
}

// hasOtherVoter reports whether the configuration has a voter besides this
// node (a replica to rebuild from).
func (n *Node) hasOtherVoter() bool {
	voters, _ := n.currentVoters()
	return otherVoterIn(voters, n.cfg.NodeID)
}

func otherVoterIn(voters map[string]bool, self string) bool {
	for id := range voters {
		if id != self {
			return true
		}
	}
	return false
}

// votersIn is the ids of conf's voters.
func votersIn(conf raft.Configuration) map[string]bool {
	voters := map[string]bool{}
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters[string(s.ID)] = true
		}
	}
	return voters
}

// currentVoters is the ids of the voters of Raft's latest configuration;
// false when Raft does not answer (it stopped).
func (n *Node) currentVoters() (map[string]bool, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	return votersIn(f.Configuration()), true
}

func (n *Node) resyncing() *resyncState { return n.resync.Load() }

// resyncLoop waits for steps 3 and 4 and finishes the resync.
func (n *Node) resyncLoop(rs *resyncState) {
	defer n.wg.Done()
	n.everyUntilStop(200*time.Millisecond, func() bool { return n.resyncStep(rs) })
}

// resyncStep advances the resync by what it sees now; true when done.
func (n *Node) resyncStep(rs *resyncState) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	demoted := false
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			demoted = s.Suffrage == raft.Nonvoter
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case !demoted || n.raft.AppliedIndex() < f.Index():
		if addr, _ := n.raft.LeaderWithID(); addr == "" {
			rs.phase = "waiting for a leader: none is reachable; this node neither votes nor stands until one has rebuilt it"
		} else {
			rs.phase = "waiting for the leader to make this node a non-voter"
		}
		return false
	case rs.target == 0:
		rs.target = max(n.raft.CommitIndex(), f.Index())
		rs.phase = fmt.Sprintf("catching up from the leader to index %d", rs.target)
		return false
	case n.raft.AppliedIndex() < rs.target:
		return false
	}
	if err := removeResyncMarker(n.cfg.DataDir); err != nil {
		n.log.Error("resync caught up but cannot remove the RESYNC marker; retrying", "err", err)
		return false
	}
	n.quarantine.lift(n)
	n.damage.Clear() // what it found is in the files set aside
	rs.phase = "done"
	n.resync.Store(nil)
	if n.members != nil {
		n.members.setResync(n.cfg.Group, false)
	}
	n.log.Info("resync done: this node holds every committed entry again and may vote once the leader promotes it",
		"caught_up_to", rs.target, "took", time.Since(rs.since).Round(time.Millisecond))
	return true
}

// resyncStatus reports the resync in progress, or nil.
func (n *Node) resyncStatus() *ResyncStatus {
	rs := n.resyncing()
	if rs == nil {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return &ResyncStatus{Phase: rs.phase, Since: rs.since, Target: rs.target}
}
