package cluster

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
)

// Pop claims messages for a consumer group, on the leader: a follower
// forwards the whole call, long-poll included, and gets back the claimed
// messages with their stored records.
func (n *Node) Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	deadline := time.Now().Add(wait)
	return route(n, ctx, forwardWrite,
		func() (*command.PopResult, error) { return n.PopLocal(ctx, in, time.Until(deadline)) },
		func(ctx context.Context, addr string) (*command.PopResult, error) {
			return n.fwd.Pop(ctx, addr, in, time.Until(deadline))
		})
}

// PopLocal runs a pop on this node, which must lead (ErrNotLeader
// otherwise, having claimed nothing): one log entry when something may be
// deliverable, and, when wait > 0 and nothing is, a park in its line (see
// parking) until a change or a time-based readiness (lease expiry, retry
// delay, window, delay) reaches it, or wait ends. It never sleep-polls.
//
// The result carries the stored messages, read from this node's state right
// after the entry applied (messages are immutable once written).
func (n *Node) PopLocal(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	in.LeaseId = LeaseIDFor(in.LeaseId)
	key := tenantKey(ctx)
	if err := n.kafkaGroup(key, in); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	var w *parked
	if wait > 0 {
		w = n.parking.join(key, in) // before the first look: no change slips between
		defer n.parking.leave(w)
	}
	empty := func() *command.PopResult {
		res := &command.PopResult{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup}
		if in.HasConflation { // still say whether it would have conflated (addendum §8)
			n.fsm.ReadAs(key, func(r *fsm.Reader) error {
				if q := r.Queue(in.Queue); q != nil {
					g := r.Group(in.Queue, cmp.Or(in.ConsumerGroup, command.QueueModeGroup))
					res.Conflation, res.ConflationEcho, res.ConflationConflict = queue.Conflation(queue.GroupPolicy, q.Options, g, in, in.ConsumerGroup)
				}
				return nil
			})
		}
		return res
	}
	// A pop that joins behind a head does not look itself: the head has
	// looked or been signalled since the last change, and hands over when
	// it leaves. (A burst of arrivals during a push would otherwise each
	// find the new message and each propose a pop for it.)
	look := w == nil || n.parking.isHead(w)
	for {
		if n.raft.State() != raft.Leader {
			return nil, ErrNotLeader // the caller tries the new leader with the time left
		}
		var ready fsm.PopReadiness
		if look {
			limit := 1
			if w != nil {
				limit = n.parking.lookLimit(w)
				n.parking.looks.Add(1)
			}
			if err := n.fsm.ReadAs(key, func(r *fsm.Reader) error {
				ready = r.PopReadiness(in, n.Now(), limit)
				return nil
			}); err != nil {
				return nil, err
			}
		}
		look = true
		// A parked pop proposes only on a granted claim: what it found may be
		// what its line's pops in flight are about to take (it then waits for
		// one of them to finish, or for a change).
		if ready.Ready && (w == nil || n.parking.claim(w, ready.Partitions)) {
			res, err := n.ApplyLocal(ctx, &command.Command{Body: &command.Command_Pop{Pop: in}})
			took := err == nil && len(res.(*command.PopResult).Messages) > 0
			if w != nil {
				// Someone else took it first, and the pop waits on: back in line.
				n.parking.finish(w, err == nil && !took && wait > 0)
			}
			if err != nil {
				return nil, err
			}
			pr := res.(*command.PopResult)
			if took {
				return n.hydrate(key, pr)
			}
			if wait <= 0 {
				return pr, nil
			}
			continue
		}
		left := time.Until(deadline)
		if wait <= 0 || left <= 0 {
			return empty(), nil
		}
		sleep := left
		if ready.NextUs > 0 && n.parking.isHead(w) { // the head looks out for its line
			sleep = min(sleep, time.Duration(ready.NextUs-n.Now())*time.Microsecond+time.Millisecond)
		}
		timer := time.NewTimer(max(sleep, time.Millisecond))
		select {
		case <-w.signal:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return empty(), nil // the client went away: claim nothing
		case <-n.draining:
			timer.Stop()
			// The node is stopping: answer empty now rather than hold the
			// shutdown until the poll times out.
			return empty(), nil
		case <-n.stop:
			timer.Stop()
			return nil, ErrShutdown
		}
		timer.Stop()
	}
}

// hydrate reads the popped messages' stored records: each partition's run
// is contiguous, so one read of its files per partition.
func (n *Node) hydrate(tenantKey string, pr *command.PopResult) (*command.PopResult, error) {
	err := n.fsm.ReadAs(tenantKey, func(r *fsm.Reader) error {
		pr.Records = make([]*command.MessageRecord, len(pr.Messages))
		for i := 0; i < len(pr.Messages); {
			m := pr.Messages[i]
			j := i + 1
			for j < len(pr.Messages) && string(pr.Messages[j].PartitionId) == string(m.PartitionId) &&
				pr.Messages[j].Seq == pr.Messages[j-1].Seq+1 {
				j++
			}
			recs, err := r.Messages(m.PartitionId, m.Seq, pr.Messages[j-1].Seq)
			if err != nil {
				return err
			}
			for k := i; k < j; k++ {
				if k-i < len(recs) {
					pr.Records[k] = recs[k-i]
				} else {
					pr.Records[k] = &command.MessageRecord{} // removed since (queue deleted); rare
				}
			}
			i = j
		}
		return nil
	})
	return pr, err
}

// kafkaGroup refuses a pop of a queue whose group of that name is a Kafka
// consumer group's (apply would deliver nothing of it either).
func (n *Node) kafkaGroup(tenantKey string, in *command.Pop) error {
	if in.Queue == "" {
		return nil
	}
	group := cmp.Or(in.ConsumerGroup, command.QueueModeGroup)
	var kafka bool
	_ = n.fsm.ReadAs(tenantKey, func(r *fsm.Reader) error {
		kafka = r.Group(in.Queue, group).GetKafka()
		return nil
	})
	if kafka {
		return fmt.Errorf("%w: consumer group %s of queue %s is a Kafka consumer group (its offsets are committed by Kafka clients); a Queen pop cannot take its messages: use another group name", ErrKafkaGroup, group, in.Queue)
	}
	return nil
}
