package grpcapi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/request"
)

// Consume pops in a loop and streams every batch it claims. Each batch's
// lease is renewed with ExtendLease commands through the node (so they are
// forwarded to the leader like any write) until the lease is gone: every
// message of it acked, a failed ack released it, or it ran out. A new pop
// waits while max_unacked_batches leases are still held. The stream ends
// when the client goes away, or with UNAVAILABLE when the node stops;
// leases it held then simply run out, and their messages come back.
func (s *Public) Consume(in *queenpb.ConsumeRequest, stream queenpb.Queen_ConsumeServer) error {
	decoded, err := pop(in.GetPop())
	if err != nil {
		return publicStatus(err)
	}
	if decoded.Wait <= 0 {
		decoded.Wait = request.DefaultPopWait
	}
	cmd, wait, match, err := s.rules.Pop(decoded)
	if err != nil {
		return publicStatus(err)
	}
	ctx := stream.Context()
	if err := s.pipe.Authorize(ctx, &command.Command{Body: &command.Command_Pop{Pop: cmd}}); err != nil {
		return publicStatus(err)
	}
	t := &leaseTracker{s: s, req: in, watch: cmd.Queue, leases: map[string]*heldLease{}}
	go t.renewLoop(ctx)
	if !match { // no queue can have these names: the stream stays open, empty
		select {
		case <-ctx.Done():
			return nil
		case <-s.node.Draining():
			return publicStatus(cluster.ErrShutdown)
		}
	}
	limit := int(max(in.MaxUnackedBatches, 1))
	for {
		if err := t.waitBelow(ctx, limit); err != nil {
			return err
		}
		round := proto.Clone(cmd).(*command.Pop) // the node mints a fresh lease id per pop
		res, err := s.pipe.Pop(ctx, round, wait)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return publicStatus(err)
		}
		if len(res.Messages) == 0 {
			continue
		}
		t.add(res)
		if err := stream.Send(popOut(res)); err != nil {
			return err
		}
	}
}

// heldLease is one streamed batch's lease and where it holds partitions.
type heldLease struct {
	id      string
	holds   [][]byte // partition ids
	group   string
	seconds int64         // each renewal's extension
	every   time.Duration // renewal period
	next    time.Time
}

// leaseTracker renews the leases a Consume stream handed out.
type leaseTracker struct {
	s      *Public
	req    *queenpb.ConsumeRequest
	watch  string
	mu     sync.Mutex
	leases map[string]*heldLease
}

// add starts tracking a popped batch's lease (none with auto_ack).
func (t *leaseTracker) add(res *command.PopResult) {
	if res.LeaseId == "" {
		return
	}
	length := time.Duration(res.LeaseExpiresUs-t.s.node.Now()) * time.Microsecond
	l := &heldLease{id: res.LeaseId, group: res.ConsumerGroup,
		seconds: int64((length + time.Second - 1) / time.Second), every: length / 2}
	if t.req.RenewSeconds > 0 {
		l.seconds = int64(t.req.RenewSeconds)
	}
	if t.req.RenewIntervalMs > 0 {
		l.every = time.Duration(t.req.RenewIntervalMs) * time.Millisecond
	}
	l.seconds, l.every = max(l.seconds, 1), max(l.every, 100*time.Millisecond)
	l.next = time.Now().Add(l.every)
	seen := map[string]bool{}
	for _, m := range res.Messages {
		if !seen[string(m.PartitionId)] {
			seen[string(m.PartitionId)] = true
			l.holds = append(l.holds, m.PartitionId)
		}
	}
	t.mu.Lock()
	t.leases[l.id] = l
	t.mu.Unlock()
}

// prune drops the leases that no longer hold any partition (this node's
// view) and returns how many are left.
func (t *leaseTracker) prune(ctx context.Context) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		now := t.s.node.Now()
		for id, l := range t.leases {
			if !l.live(rd, now) {
				delete(t.leases, id)
			}
		}
		return nil
	})
	return len(t.leases)
}

func (l *heldLease) live(rd *fsm.Reader, now int64) bool {
	for _, pid := range l.holds {
		if c := rd.Cursor(pid, l.group); c != nil && c.Lease != nil && c.Lease.LeaseId == l.id && c.Lease.ExpiresUs > now {
			return true
		}
	}
	return false
}

// waitBelow blocks until fewer than limit leases are held, waking on every
// applied change of the queue (an ack, a release).
func (t *leaseTracker) waitBelow(ctx context.Context, limit int) error {
	for {
		select {
		case <-t.s.node.Draining():
			return publicStatus(cluster.ErrShutdown)
		default:
		}
		changed := t.s.node.Watch(ctx, t.watch)
		if t.prune(ctx) < limit {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.s.node.Draining():
		case <-changed:
		case <-time.After(time.Second): // expiries change nothing in the log
		}
	}
}

// renewLoop extends every held lease when its period comes round, until
// the stream ends. A lease the node no longer knows is dropped.
func (t *leaseTracker) renewLoop(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		var due []*heldLease
		for _, l := range t.leases {
			if time.Now().After(l.next) {
				due = append(due, l)
			}
		}
		t.mu.Unlock()
		if len(due) == 0 {
			continue
		}
		t.prune(ctx) // an acked lease needs no log entry to find out
		for _, l := range due {
			t.renew(ctx, l)
		}
	}
}

func (t *leaseTracker) renew(ctx context.Context, l *heldLease) {
	t.mu.Lock()
	_, held := t.leases[l.id]
	t.mu.Unlock()
	if !held {
		return
	}
	res, err := propose[*command.ExtendResult](t.s, ctx, nil, &command.Command{Body: &command.Command_ExtendLease{
		ExtendLease: &command.ExtendLease{LeaseId: l.id, Seconds: l.seconds}}})
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, held := t.leases[l.id]; !held {
		return // pruned meanwhile
	}
	switch {
	case err != nil: // no leader for now: try again on the next tick
	case !res.Success:
		delete(t.leases, l.id)
	default:
		l.next = time.Now().Add(l.every)
	}
}
