package request

import (
	"time"

	"github.com/queen-node/queen-node/command"
)

// Pop is a pop as a front end decoded it (spec §4.3). Numbers out of range
// fall back to their defaults or are clamped, never refused: a pop query is
// never a 4xx (spec §1.1).
type Pop struct {
	Queue         string
	Partition     string // the partition route only
	HasPartition  bool
	Namespace     string // the namespace route (spec §4.3.5): Queue is empty
	Task          string
	ConsumerGroup string // "" or __QUEUE_MODE__ = queue mode
	Batch         int64  // < 1 = 1
	Partitions    int64  // < 1 = 1
	AutoAck       bool
	LeaseSeconds  int64 // > 0 overrides the queue's leaseTime
	// SubscriptionMode and SubscriptionFrom are where a named group's first
	// pop starts (spec §5.7), as the query spells them: mode "new",
	// "new-only", "all" (or anything else: all), "" = the server's default;
	// from "now" or a timestamp, which wins over the mode.
	SubscriptionMode string
	SubscriptionFrom string
	Wait             time.Duration // long-poll up to this long; 0 = answer at once
	// Conflation is the pop's conflation flag (addendum §8); nil = not sent.
	Conflation *bool
}

// Pop turns a pop into its command and the time to wait. match=false means
// it names something no queue can have (a name the state cannot key): the
// answer is empty (HTTP 204) without asking the node. The one refusal is
// conflation where it cannot apply (addendum §8): without a consumer
// group, with autoAck, or across a namespace's queues.
func (r *Rules) Pop(in Pop) (cmd *command.Pop, wait time.Duration, match bool, err error) {
	if in.Conflation != nil && *in.Conflation {
		group := in.ConsumerGroup
		switch {
		case group == "" || group == command.QueueModeGroup:
			return nil, 0, false, Bad("conflation needs a consumerGroup (it is not for queue mode)")
		case in.AutoAck:
			return nil, 0, false, Bad("conflation does not go with autoAck")
		case in.Queue == "":
			return nil, 0, false, Bad("conflation needs a queue (not a namespace pop)")
		}
	}
	cmd = &command.Pop{
		Queue: in.Queue, ConsumerGroup: in.ConsumerGroup, Namespace: in.Namespace, Task: in.Task,
		Batch: uint32(min(max(in.Batch, 1), MaxPopBatch)), Partitions: uint32(min(max(in.Partitions, 1), MaxPopPartitions)),
		AutoAck: in.AutoAck,
	}
	if cmd.ConsumerGroup == command.QueueModeGroup {
		cmd.ConsumerGroup = ""
	}
	if in.HasPartition {
		cmd.Partition, cmd.HasPartition, cmd.Partitions = in.Partition, true, 1
	}
	if in.LeaseSeconds > 0 {
		cmd.LeaseSeconds = min(in.LeaseSeconds, MaxSeconds)
	}
	cmd.Subscription, cmd.SubscriptionFromUs = r.subscription(in.SubscriptionMode, in.SubscriptionFrom)
	if in.Conflation != nil {
		cmd.HasConflation, cmd.Conflation = true, *in.Conflation
	}
	wait = min(max(in.Wait, 0), MaxPopWait)
	match = keyable(cmd.Queue, cmd.ConsumerGroup, cmd.Partition, cmd.Namespace, cmd.Task)
	return cmd, wait, match, nil
}

// subscription resolves where a named group's first pop starts (spec §5.7).
func (r *Rules) subscription(mode, from string) (command.Pop_Subscription, int64) {
	if from != "" {
		if from == "now" {
			return command.Pop_NEW, 0
		}
		if us, ok := ParseTime(from); ok {
			return command.Pop_FROM, us
		}
	}
	switch mode {
	case "new", "new-only":
		return command.Pop_NEW, 0
	case "":
		if r.opts.DefaultSubscriptionMode == "all" {
			return command.Pop_DEFAULT_ALL, 0
		}
		return command.Pop_NEW, 0
	}
	return command.Pop_DEFAULT_ALL, 0
}
