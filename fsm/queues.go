package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

// DefaultOptions are a new queue's options (spec §4.1).
func DefaultOptions() *command.QueueOptions {
	i := func(v int64) *int64 { return &v }
	b := func(v bool) *bool { return &v }
	return &command.QueueOptions{
		LeaseTime: i(300), RetryLimit: i(3), RetryDelay: i(1000), MaxSize: i(0),
		DelayedProcessing: i(0), WindowBuffer: i(0), Priority: i(0), Ttl: i(3600),
		RetentionEnabled: b(false), RetentionSeconds: i(0), CompletedRetentionSeconds: i(0),
		MaxWaitTimeSeconds: i(0), DeadLetterQueue: b(false), DlqAfterMaxRetries: b(false),
		EncryptionEnabled: b(false), DedupWindowSeconds: i(0),
	}
}

// mergeOptions sets in dst every option that src names (2.0 merge
// semantics: an option not named keeps its value).
func mergeOptions(dst, src *command.QueueOptions) {
	if src == nil {
		return
	}
	// proto.Merge copies exactly the fields set in src, which for optional
	// scalars is "present in the request".
	proto.Merge(dst, src)
}

// leaseSeconds is the lease length of a pop: 0 falls back to 60 (spec §4.1).
func leaseSeconds(o *command.QueueOptions, override int64) int64 {
	if override > 0 {
		return override
	}
	if v := o.GetLeaseTime(); v > 0 {
		return v
	}
	return 60
}

const defaultPartition = "Default"

func applyConfigure(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetConfigure()
	qs := c.ensureQueue(in.Queue)
	if in.HasNamespace {
		qs.rec.Namespace = in.Namespace
	}
	if in.HasTask {
		qs.rec.Task = in.Task
	}
	mergeOptions(qs.rec.Options, in.Options)
	qs.dirty = true
	ps := c.ensurePartition(in.Queue, defaultPartition)
	c.touch(in.Queue) // a shorter window or delay may make messages deliverable
	return &command.ConfigureResult{
		QueueId: qs.rec.Id, PartitionId: ps.rec.Id, Queue: qs.rec.Name,
		Namespace: qs.rec.Namespace, Task: qs.rec.Task, Options: proto.Clone(qs.rec.Options).(*command.QueueOptions),
	}, true
}

// applyDeleteQueue removes the queue from view at once: its record, its
// partitions' names and its groups. The bulk (messages, dedup, cursors, dead
// letters) is keyed by ids that are never reused, so it is invisible from
// now on; it goes to the graveyard, and sweep entries purge it in bounded
// steps. Deleting a missing queue is a success (idempotent).
func applyDeleteQueue(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	name := cmd.GetDeleteQueue().Queue
	qs := c.queue(name)
	if qs == nil {
		return &command.DeleteQueueResult{Existed: false}, true
	}
	c.tx.Put(bGraveyard, graveKey(graveQueue, qs.rec.Id), nil)
	pfx := prefix(name)
	cur := c.tx.Cursor(bPartitions)
	var partKeys [][]byte
	for k, v := cur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = cur.Next() {
		rec := &command.PartitionRecord{}
		mustUnmarshal(v, rec)
		partKeys = append(partKeys, append([]byte(nil), k...))
		c.tx.Put(bGraveyard, graveKey(gravePartition, rec.Id), nil)
		c.tx.Delete(bPartitionIDs, rec.Id)
	}
	for _, k := range partKeys {
		c.tx.Delete(bPartitions, k)
		if ps := c.parts[string(k)]; ps != nil {
			delete(c.partIDs, string(ps.rec.Id))
		}
		c.cachePartition(string(k), nil)
	}
	gcur := c.tx.Cursor(bGroups)
	var groupKeys [][]byte
	for k, _ := gcur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, _ = gcur.Next() {
		groupKeys = append(groupKeys, append([]byte(nil), k...))
	}
	for _, k := range groupKeys {
		c.tx.Delete(bGroups, k)
	}
	c.tx.Delete(bQueues, pfx)
	c.queues[name] = nil
	c.touch(name)
	return &command.DeleteQueueResult{Existed: true}, true
}

// Graveyard kinds.
const (
	graveQueue     = 'q'
	gravePartition = 'p'
)

func graveKey(kind byte, id []byte) []byte {
	return append([]byte{kind}, id...)
}
