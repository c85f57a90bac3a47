package queue

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
)

// Domain is the queue state of one Raft log.
type Domain struct {
	logID string // names the log: ids derived from its indexes name it too
	msgs  *msgstore.Store
	dedup *dedupIndex
}

// New makes the domain of the log named logID over its message store (the
// records live in the state file the Tx of each command writes to).
func New(logID string, msgs *msgstore.Store) *Domain {
	return &Domain{logID: logID, msgs: msgs, dedup: newDedupIndex()}
}

// Messages is the domain's message store.
func (d *Domain) Messages() *msgstore.Store { return d.msgs }

// Reset forgets what the domain keeps in memory (after the state was
// replaced by a snapshot).
func (d *Domain) Reset() { d.dedup = newDedupIndex() }

// Tx is one command's view of the queue state: the command's staged
// transaction of the state file, its stage of the message store, the entry's
// index and time. It caches the records the command touches, so that a push
// of a hundred messages to one partition decodes and encodes the partition
// record once; Keep writes them into the staged transaction.
type Tx struct {
	d     *Domain
	tx    *store.Tx
	batch *msgstore.Batch
	stage *msgstore.Stage
	index uint64
	now   int64 // µs, the entry's effective time
	// firstDeadLetter: the command filed a dead letter in a DLQ that held
	// none (so the dead letters' message index is complete: FirstDeadLetter)
	firstDeadLetter bool
	ordinal         uint32
	touched         []string
	dedup           []dedupInsert   // this command's inserts, to take back on Discard
	pruned          map[string]bool // partitions whose dedup index this command pruned
	// flows counts, by queue, what the command did to messages (flows.go)
	flows map[string]*Flow

	queues     map[string]*queueState
	parts      map[string]*partState // key: queue 0 partition
	partIDs    map[string]*partState // key: pid
	keyBuf     []byte                // partition's scratch key
	prefetched uint64                // PrefetchDedup's reads end here, so they are made
	cursors    map[string]*cursorState
	groups     map[string]*groupState
}

// Begin starts a command: tx is its staged transaction, batch the message
// store's batch of the entry's Raft batch, index and now the entry's.
func (d *Domain) Begin(tx *store.Tx, batch *msgstore.Batch, index uint64, now int64) *Tx {
	return &Tx{d: d, tx: tx, batch: batch, stage: batch.Stage(), index: index, now: now}
}

// Keep writes the command's cached records into its staged transaction and
// makes its message writes part of the batch. The caller commits the staged
// transaction.
func (t *Tx) Keep() {
	t.flush()
	t.stage.Keep()
}

// Discard takes back everything the command wrote: its message writes and
// its inserts into the in-memory dedup index (the caller discards the
// staged transaction).
func (t *Tx) Discard() {
	t.stage.Discard()
	for i := len(t.dedup) - 1; i >= 0; i-- {
		t.d.dedup.remove(t.dedup[i])
	}
	t.dedup = nil
}

// Touched lists the queues whose deliverable set the command may have
// changed (long-poll pops of them look again).
func (t *Tx) Touched() []string { return t.touched }

// Now is the entry's time.
func (t *Tx) Now() int64 { return t.now }

func (t *Tx) touch(queue string) {
	if n := len(t.touched); n > 0 && t.touched[n-1] == queue {
		return
	}
	t.touched = append(t.touched, queue)
}

// newID derives a fresh UUID from the log's name, the entry's index and a
// per-command ordinal: unique in every log, identical on every replica. It
// names objects that exist only if apply creates them (queues, partitions).
func (t *Tx) newID() []byte {
	h := sha256.New()
	h.Write([]byte{'q'})
	h.Write([]byte(t.d.logID))
	var in [12]byte
	binary.BigEndian.PutUint64(in[:], t.index)
	binary.BigEndian.PutUint32(in[8:], t.ordinal)
	t.ordinal++
	h.Write(in[:])
	id := h.Sum(nil)[:16:16]
	id[6] = (id[6] & 0x0f) | 0x80 // version 8: custom
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id
}

// nextOrdinal numbers records one command writes in the same instant.
func (t *Tx) nextOrdinal() uint32 {
	n := t.ordinal
	t.ordinal++
	return n
}

type queueState struct {
	rec   *command.QueueRecord
	dirty bool
}

type partState struct {
	rec   *command.PartitionRecord
	dirty bool
}

type cursorState struct {
	key   []byte
	rec   *command.CursorRecord
	dirty bool
	fresh bool // no record was stored
}

type groupState struct {
	key   []byte
	rec   *command.GroupRecord
	dirty bool
	made  bool // registered by this entry
}

// queue returns the queue's state, or nil when it does not exist.
func (t *Tx) queue(name string) *queueState {
	if qs, ok := t.queues[name]; ok {
		return qs
	}
	if t.queues == nil {
		t.queues = make(map[string]*queueState)
	}
	var qs *queueState
	if v := t.tx.Get(bQueues, prefix(name)); v != nil {
		rec := &command.QueueRecord{}
		command.MustDecodeRecord(v, rec)
		qs = &queueState{rec: rec}
	}
	t.queues[name] = qs
	return qs
}

// Encrypts reports whether the queue exists and encrypts its payloads at
// rest (spec §5.12).
func (t *Tx) Encrypts(name string) bool {
	qs := t.queue(name)
	return qs != nil && qs.rec.GetOptions().GetEncryptionEnabled()
}

// ensureQueue returns the queue, creating it with the defaults of an
// implicit queue (spec §2): namespace before the first '.', task after it.
func (t *Tx) ensureQueue(name string) *queueState {
	if qs := t.queue(name); qs != nil {
		return qs
	}
	ns, task := name, ""
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			ns, task = name[:i], name[i+1:]
			break
		}
	}
	qs := &queueState{dirty: true, rec: &command.QueueRecord{
		Id: t.newID(), Name: name, Namespace: ns, Task: task, CreatedUs: t.now, Options: DefaultOptions(),
	}}
	t.queues[name] = qs
	return qs
}

// partition returns the partition's state, or nil when it does not exist.
func (t *Tx) partition(queue, name string) *partState {
	t.keyBuf = append(append(append(t.keyBuf[:0], queue...), 0), name...)
	if ps, ok := t.parts[string(t.keyBuf)]; ok { // no string is made to look up
		return ps
	}
	key := string(t.keyBuf)
	var ps *partState
	if v := t.tx.Get(bPartitions, []byte(key)); v != nil {
		rec := &command.PartitionRecord{}
		command.MustDecodeRecord(v, rec)
		ps = &partState{rec: rec}
	}
	t.cachePartition(key, ps)
	return ps
}

func (t *Tx) cachePartition(key string, ps *partState) {
	if t.parts == nil {
		t.parts = make(map[string]*partState)
		t.partIDs = make(map[string]*partState)
	}
	t.parts[key] = ps
	if ps != nil {
		t.partIDs[string(ps.rec.Id)] = ps
	}
}

// ensurePartition returns the partition, creating it.
func (t *Tx) ensurePartition(queue, name string) *partState {
	if ps := t.partition(queue, name); ps != nil {
		return ps
	}
	ps := &partState{dirty: true, rec: &command.PartitionRecord{
		Id: t.newID(), Queue: queue, Name: name, CreatedUs: t.now, NextSeq: 1, FirstSeq: 1,
	}}
	t.tx.Put(bPartitionIDs, ps.rec.Id, join(queue, name))
	t.cachePartition(string(join(queue, name)), ps)
	return ps
}

// partitionByID finds a partition by its UUID, or nil.
func (t *Tx) partitionByID(pid []byte) *partState {
	if ps, ok := t.partIDs[string(pid)]; ok {
		return ps
	}
	if len(pid) == 0 {
		return nil
	}
	v := t.tx.Get(bPartitionIDs, pid)
	if v == nil {
		return nil
	}
	q, p := splitJoined(v)
	return t.partition(q, p)
}

// cursor returns the (partition, group) state; rec is a new empty record
// (fresh) when none is stored.
func (t *Tx) cursor(pid []byte, group string) *cursorState {
	key := pidKey(pid, group)
	if cs, ok := t.cursors[string(key)]; ok {
		return cs
	}
	if t.cursors == nil {
		t.cursors = make(map[string]*cursorState)
	}
	cs := &cursorState{key: key, rec: &command.CursorRecord{}}
	if v := t.tx.Get(bCursors, key); v != nil {
		command.MustDecodeRecord(v, cs.rec)
	} else {
		cs.fresh = true
	}
	t.cursors[string(key)] = cs
	return cs
}

// group returns the (queue, group) subscription, or a state with a nil
// record when the group never popped the queue.
func (t *Tx) group(queue, group string) *groupState {
	key := join(queue, group)
	if gs, ok := t.groups[string(key)]; ok {
		return gs
	}
	if t.groups == nil {
		t.groups = make(map[string]*groupState)
	}
	gs := &groupState{key: key}
	if v := t.tx.Get(bGroups, key); v != nil {
		gs.rec = &command.GroupRecord{}
		command.MustDecodeRecord(v, gs.rec)
	}
	t.groups[string(key)] = gs
	return gs
}

// flush writes every changed cached record into the staged transaction.
// Map order does not leak: the staged transaction commits in key order.
func (t *Tx) flush() {
	for name, qs := range t.queues {
		if qs != nil && qs.dirty {
			t.tx.Put(bQueues, prefix(name), command.MustEncodeRecord(qs.rec))
			qs.dirty = false
		}
	}
	for key, ps := range t.parts {
		if ps != nil && ps.dirty {
			t.tx.Put(bPartitions, []byte(key), command.MustEncodeRecord(ps.rec))
			ps.dirty = false
		}
	}
	for _, cs := range t.cursors {
		if cs.dirty {
			t.tx.Put(bCursors, cs.key, command.MustEncodeRecord(cs.rec))
			cs.dirty = false
		}
	}
	for _, gs := range t.groups {
		if gs.dirty && gs.rec != nil {
			t.tx.Put(bGroups, gs.key, command.MustEncodeRecord(gs.rec))
			gs.dirty = false
		}
	}
}
