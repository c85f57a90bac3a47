package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

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
			// Parked long-polls look again: on a node that lost leadership
			// they go to the new leader.
			n.hub.notify(map[string]struct{}{"*": {}})
			n.parking.wakeAll()
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
	n.clock.anchor(n.fsm.LastNow(), n.sinceLastApply())
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
	n.reconcile()
	tick := time.NewTicker(n.cfg.SweepInterval)
	defer tick.Stop()
	membership := time.NewTicker(time.Second)
	defer membership.Stop()
	timers := time.NewTicker(n.cfg.TimerTick)
	defer timers.Stop()
	checks := time.NewTicker(n.scrubInterval())
	defer checks.Stop()
	var changed <-chan struct{}
	if n.members != nil {
		changed = n.members.changed
	}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			for _, key := range n.fsm.TenantKeys() {
				n.indexDeadLetters(key, stop)
				n.sweep(key, stop)
				n.retain(key, stop)
				n.drainBuffer(key, stop)
			}
		case <-membership.C:
			n.reconcile()
			n.proposeStateCheck(false)
		case <-checks.C:
			n.proposeStateCheck(true)
		case <-timers.C:
			for _, key := range n.fsm.TenantKeys() {
				n.fireTimers(key, stop)
			}
		case <-changed:
			n.reconcile()
		}
	}
}

// The loops below each do one tenant's work (its tenant.Key); the leader
// runs them for every tenant its state holds, each tenant's in entries of
// its own (a command is one tenant's).

// fireTimers proposes fire steps while timers are due (addendum §1.4).
// Apply decides which timers fire, by the fire entry's own time.
func (n *Node) fireTimers(key string, stop chan struct{}) {
	for i := 0; i < 64; i++ {
		var due bool
		_ = n.fsm.ReadAs(key, func(r *fsm.Reader) error {
			next := r.NextTimerDue()
			due = next != 0 && next <= n.Now() && r.Switches().TimersFireEnabled
			return nil
		})
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &command.Command{Tenant: key, Body: &command.Command_FireTimers{FireTimers: &command.FireTimers{}}})
		cancel()
		if err != nil {
			n.log.Warn("timer fire step failed; will retry", "err", err)
			return
		}
		f, ok := res.(*command.FireResult)
		if !ok {
			return
		}
		n.m.timersFired.WithLabelValues("fired").Add(float64(f.Fired))
		n.m.timersFired.WithLabelValues("deferred").Add(float64(f.Deferred))
		n.m.timersFired.WithLabelValues("dead_letter").Add(float64(f.Dead))
		for _, l := range f.LatenessUs {
			n.m.timerLateness.Observe(float64(l) / 1e6)
		}
		if !f.More {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// retain runs one retention pass (spec §5.9) when the state has something
// past a queue's retention: Retain entries over every partition in key
// order, each going on where the last one stopped. What goes is decided in
// apply, by each entry's time.
func (n *Node) retain(key string, stop chan struct{}) {
	idle := n.cfg.PartitionIdle.Microseconds()
	due := false
	_ = n.fsm.ReadAs(key, func(r *fsm.Reader) error { due = r.RetainDue(n.Now(), idle); return nil })
	if !due {
		return
	}
	var after []byte
	for i := 0; i < 10000; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &command.Command{Tenant: key, Body: &command.Command_Retain{Retain: &command.Retain{
			After: after, Limit: n.cfg.SweepLimit, PartitionIdleUs: idle}}})
		cancel()
		if err != nil {
			n.log.Warn("retention step failed; the next interval starts again", "err", err)
			return
		}
		r, ok := res.(*command.RetainResult)
		if !ok {
			return
		}
		n.m.countRetained(r)
		if len(r.Next) == 0 {
			return
		}
		after = r.Next
		select {
		case <-stop:
			return
		default:
		}
	}
}

// DrainPushBuffer appends, a bounded number of steps (each an entry on
// the leader, each within timeout), the pushes push maintenance held, and
// returns how many still wait (the leader's loop, drainBuffer, goes on
// with them; an error here is the loop's to retry). A POST that ends push
// maintenance calls it so that its answer says what is left.
func (n *Node) DrainPushBuffer(ctx context.Context, timeout time.Duration) uint64 {
	var left uint64
	for _, key := range n.fsm.TenantKeys() { // every tenant's buffer: the switch is the log's
		tctx := tenant.With(ctx, tenant.Name(key))
		for range drainSteps {
			c, cancel := context.WithTimeout(tctx, timeout)
			res, err := n.Apply(c, &command.Command{Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{}}})
			cancel()
			d, ok := res.(*command.DrainResult)
			if err != nil || !ok {
				return left
			}
			if left = d.Remaining; left == 0 || d.Appended == 0 {
				break
			}
		}
	}
	return left
}

// drainSteps bounds the drain entries DrainPushBuffer proposes.
const drainSteps = 100

// drainBuffer appends, in bounded steps, the pushes push maintenance held
// once it is off (spec §4.14). A POST that ends maintenance drains too;
// this finishes what it left, or what a leader change interrupted.
func (n *Node) drainBuffer(key string, stop chan struct{}) {
	for i := 0; i < 1000; i++ {
		due := false
		_ = n.fsm.ReadAs(key, func(r *fsm.Reader) error { s := r.Switches(); due = !s.PushMaintenance && r.Buffered(); return nil })
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &command.Command{Tenant: key, Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{Limit: n.cfg.SweepLimit}}})
		cancel()
		if err != nil {
			n.log.Warn("draining the push buffer failed; will retry", "err", err)
			return
		}
		if d, ok := res.(*command.DrainResult); !ok || d.Appended == 0 {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// sweep proposes sweep entries while the state has something expired.
// indexDeadLetters proposes the steps of the dead letters' message-index
// backfill while the state says it is incomplete (a state written before
// the index existed): entries, so every replica files the same records.
func (n *Node) indexDeadLetters(key string, stop chan struct{}) {
	for i := 0; i < 100; i++ {
		due := false
		_ = n.fsm.ReadAs(key, func(r *fsm.Reader) error { due = r.IndexDue(); return nil })
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &command.Command{Tenant: key, Body: &command.Command_IndexDeadLetters{IndexDeadLetters: &command.IndexDeadLetters{}}})
		cancel()
		if err != nil {
			n.log.Warn("indexing dead letters failed; will retry", "err", err)
			return
		}
		if r, ok := res.(*command.IndexDeadLettersResult); ok && r.Indexed > 0 {
			n.log.Info("dead letters stored before the message index were indexed", "records", r.Indexed, "more", r.More)
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

func (n *Node) sweep(key string, stop chan struct{}) {
	for i := 0; i < 100; i++ {
		due := false
		_ = n.fsm.ReadAs(key, func(r *fsm.Reader) error { due = r.SweepDue(n.Now()); return nil })
		if !due {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		res, err := n.applyLocal(ctx, &command.Command{Tenant: key, Body: &command.Command_Sweep{Sweep: &command.Sweep{Limit: n.cfg.SweepLimit}}})
		cancel()
		if err != nil {
			n.log.Warn("sweep failed; will retry", "err", err)
			return
		}
		if r, ok := res.(*command.SweepResult); !ok || !r.More {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// flushLoop commits the state file's last batches once they have waited
// fsm.CommitAfter (a node whose apply went quiet would otherwise keep
// them uncommitted, and the message files they drop, until its next batch).
// While the data disk is low it waits: a commit that fails for space would
// fail the state file (the node restarts from the log), and the batches
// stay readable uncommitted; apply pauses before the disk is full, so no
// other commit runs meanwhile.
func (n *Node) flushLoop() {
	defer n.wg.Done()
	n.everyUntilStop(fsm.CommitAfter, func() bool {
		if n.disk.Low() {
			return false
		}
		if err := n.fsm.FlushStale(); err != nil {
			n.log.Error("committing the state file's last batches failed", "err", err)
		}
		return false
	})
}

// everyUntilStop calls step every period until it reports done or the node
// stops.
func (n *Node) everyUntilStop(period time.Duration, step func() (done bool)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		if step() {
			return
		}
	}
}

// snapshotLoop takes a snapshot when enough bytes were applied since the
// last one (Raft's own trigger counts entries, which says little about the
// log's size when entries carry batches of payloads; its threshold is set
// high, see raftlog.RaftConfig).
func (n *Node) snapshotLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var stateSize int64
	var sized time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		// A snapshot copies the whole state, the state file and the live
		// message files, so the trigger grows with it: at most about one
		// state's worth of snapshot writes per half a state of log, whatever
		// the backlog. The files are measured only past the floor, and at
		// most every ten seconds (it walks the message store).
		since := n.fsm.BytesSinceSnapshot()
		if since < n.cfg.SnapshotBytes {
			continue
		}
		if time.Since(sized) > 10*time.Second {
			stateSize, sized = n.db.Size()+n.msgs.Size(), time.Now()
		}
		if since < stateSize/2 {
			continue
		}
		if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.log.Warn("size-triggered snapshot failed", "err", err)
		}
	}
}
