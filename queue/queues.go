package queue

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
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
		EncryptionEnabled: b(false), DedupWindowSeconds: i(DefaultDedupWindowSeconds),
		RetryBackoff: b(false), RetryDelayMax: i(leases.DefaultRetryDelayMaxMs),
	}
}

// DefaultDedupWindowSeconds is the dedup window of a queue that never set
// one (addendum §4.6).
const DefaultDedupWindowSeconds = 3600

// DedupWindowUs is the queue's dedup window; 0 = no dedup.
func DedupWindowUs(o *command.QueueOptions) int64 {
	if o.DedupWindowSeconds == nil {
		return DefaultDedupWindowSeconds * 1e6
	}
	return o.GetDedupWindowSeconds() * 1e6
}

// retryOf is how the queue spaces redeliveries (spec §5.4).
func retryOf(o *command.QueueOptions) leases.Retry {
	return leases.Retry{DelayMs: o.GetRetryDelay(), Backoff: o.GetRetryBackoff(), MaxDelayMs: o.GetRetryDelayMax()}
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

// DefaultPartition is the partition a push that names none goes to.
const DefaultPartition = "Default"

// Configure creates or reconfigures a queue: options it names change (2.0
// merge semantics), the others keep their value; the Default partition is
// created with it.
func (t *Tx) Configure(in *command.Configure) *command.ConfigureResult {
	qs := t.ensureQueue(in.Queue)
	if in.HasNamespace {
		qs.rec.Namespace = in.Namespace
	}
	if in.HasTask {
		qs.rec.Task = in.Task
	}
	if in.Options != nil {
		window := DedupWindowUs(qs.rec.Options)
		// proto.Merge copies exactly the fields set, which for optional
		// scalars is "present in the request".
		proto.Merge(qs.rec.Options, in.Options)
		if DedupWindowUs(qs.rec.Options) != window {
			t.forgetDedup(in.Queue) // each partition's index holds the old window
		}
	}
	if qs.rec.Options.DedupWindowSeconds == nil { // stored before the window existed
		w := int64(DefaultDedupWindowSeconds)
		qs.rec.Options.DedupWindowSeconds = &w
	}
	qs.dirty = true
	ps := t.ensurePartition(in.Queue, DefaultPartition)
	t.touch(in.Queue) // a shorter window or delay may make messages deliverable
	return &command.ConfigureResult{
		QueueId: qs.rec.Id, PartitionId: ps.rec.Id, Queue: qs.rec.Name,
		Namespace: qs.rec.Namespace, Task: qs.rec.Task, Options: proto.Clone(qs.rec.Options).(*command.QueueOptions),
	}
}

// forgetDedup drops the dedup index of every partition of queue.
func (t *Tx) forgetDedup(queue string) {
	pfx := prefix(queue)
	cur := t.tx.Cursor(bPartitions)
	for k, v := cur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = cur.Next() {
		rec := &command.PartitionRecord{}
		command.MustDecodeRecord(v, rec)
		t.d.dedup.drop(rec.Id)
	}
}

// DeleteQueue removes the queue from view at once: its record, its
// partitions' names, its groups and their leases. The rest (message files,
// cursors, dead letters) is keyed by ids that are never reused, so it is
// invisible from now on; it goes to the graveyard, which sweeps purge in
// bounded steps, and the message files go when the batch commits. Deleting
// a missing queue is a success (idempotent).
func (t *Tx) DeleteQueue(name string) *command.DeleteQueueResult {
	qs := t.queue(name)
	if qs == nil {
		return &command.DeleteQueueResult{Existed: false}
	}
	t.tx.Put(bGraveyard, graveKey(graveQueue, qs.rec.Id), nil)
	pfx := prefix(name)
	cur := t.tx.Cursor(bPartitions)
	var partKeys [][]byte
	var pids [][]byte
	for k, v := cur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, v = cur.Next() {
		rec := &command.PartitionRecord{}
		command.MustDecodeRecord(v, rec)
		partKeys = append(partKeys, append([]byte(nil), k...))
		pids = append(pids, rec.Id)
	}
	for i, k := range partKeys {
		pid := pids[i]
		t.tx.Put(bGraveyard, graveKey(gravePartition, pid), nil)
		t.tx.Delete(bPartitionIDs, pid)
		t.tx.Delete(bPartitions, k)
		if ps := t.parts[string(k)]; ps != nil {
			delete(t.partIDs, string(ps.rec.Id))
		}
		t.cachePartition(string(k), nil)
		t.batch.RemovePartition(pid)
		t.d.dedup.drop(pid)
	}
	gcur := t.tx.Cursor(bGroups)
	var groupKeys [][]byte
	for k, _ := gcur.Seek(pfx); k != nil && hasPrefix(k, pfx); k, _ = gcur.Next() {
		groupKeys = append(groupKeys, append([]byte(nil), k...))
	}
	for _, k := range groupKeys {
		t.tx.Delete(bGroups, k)
	}
	t.tx.Delete(bQueues, pfx)
	t.queues[name] = nil
	t.touch(name)
	return &command.DeleteQueueResult{Existed: true}
}

// dropLeasesOf removes the lease holders of a deleted partition's cursors
// (leases of cursors the graveyard purges must not stay in the table).
func (t *Tx) dropLeasesOf(pid []byte) {
	c := t.tx.Cursor(bCursors)
	type held struct {
		lease, group string
	}
	var hs []held
	for k, v := c.Seek(pid); k != nil && hasPrefix(k, pid); k, v = c.Next() {
		rec := &command.CursorRecord{}
		command.MustDecodeRecord(v, rec)
		if rec.Lease != nil {
			hs = append(hs, held{rec.Lease.LeaseId, string(k[len(pid):])})
		}
	}
	for _, h := range hs {
		leases.Remove(t.tx, h.lease, pid, h.group)
	}
}
