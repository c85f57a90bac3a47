package fsm

import (
	"crypto/sha256"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// applyCtx is one command's view of the state. It caches the records the
// command reads so that, for example, a push of a hundred items to one
// partition decodes and encodes the partition record once; flush writes the
// changed records into the staged transaction before commit.
type applyCtx struct {
	tx      *store.Tx
	index   uint64
	now     int64 // µs, the entry's effective time
	meta    *command.MetaRecord
	changes *Changes
	touched []string
	ordinal uint32

	queues  map[string]*queueState
	parts   map[string]*partState // key: queue 0 partition
	partIDs map[string]*partState // key: pid
	cursors map[string]*cursorState
	groups  map[string]*groupState
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
}

func newApplyCtx(tx *store.Tx, index uint64, now int64, meta *command.MetaRecord, changes *Changes) *applyCtx {
	return &applyCtx{tx: tx, index: index, now: now, meta: meta, changes: changes}
}

// touch notes that a queue's deliverable set may have changed.
func (c *applyCtx) touch(queue string) {
	if n := len(c.touched); n > 0 && c.touched[n-1] == queue {
		return
	}
	c.touched = append(c.touched, queue)
}

func (c *applyCtx) commitChanges() {
	for _, q := range c.touched {
		c.changes.touch(q)
	}
}

// newID derives a fresh UUID from the entry's index and a per-command
// ordinal: unique in the log, identical on every replica. It is used for ids
// that exist only if apply creates the object (queues, partitions).
func (c *applyCtx) newID() []byte {
	var in [13]byte
	in[0] = 'q'
	binary.BigEndian.PutUint64(in[1:], c.index)
	binary.BigEndian.PutUint32(in[9:], c.ordinal)
	c.ordinal++
	sum := sha256.Sum256(in[:])
	id := sum[:16:16]
	id[6] = (id[6] & 0x0f) | 0x80 // version 8: custom
	id[8] = (id[8] & 0x3f) | 0x80 // RFC 4122 variant
	return id
}

func mustUnmarshal(b []byte, m proto.Message) {
	if err := proto.Unmarshal(b, m); err != nil {
		panic("fsm: stored record does not decode: " + err.Error())
	}
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("fsm: record does not encode: " + err.Error())
	}
	return b
}

// queue returns the queue's state, or nil when it does not exist.
func (c *applyCtx) queue(name string) *queueState {
	if qs, ok := c.queues[name]; ok {
		return qs
	}
	if c.queues == nil {
		c.queues = make(map[string]*queueState)
	}
	var qs *queueState
	if v := c.tx.Get(bQueues, prefix(name)); v != nil {
		rec := &command.QueueRecord{}
		mustUnmarshal(v, rec)
		qs = &queueState{rec: rec}
	}
	c.queues[name] = qs
	return qs
}

// ensureQueue returns the queue, creating it with the defaults of an
// implicit queue (spec §2): namespace before the first '.', task after it.
func (c *applyCtx) ensureQueue(name string) *queueState {
	if qs := c.queue(name); qs != nil {
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
		Id: c.newID(), Name: name, Namespace: ns, Task: task, CreatedUs: c.now,
		Options: DefaultOptions(),
	}}
	c.queues[name] = qs
	return qs
}

// partition returns the partition's state, or nil when it does not exist.
func (c *applyCtx) partition(queue, name string) *partState {
	key := string(join(queue, name))
	if ps, ok := c.parts[key]; ok {
		return ps
	}
	var ps *partState
	if v := c.tx.Get(bPartitions, []byte(key)); v != nil {
		rec := &command.PartitionRecord{}
		mustUnmarshal(v, rec)
		ps = &partState{rec: rec}
	}
	c.cachePartition(key, ps)
	return ps
}

func (c *applyCtx) cachePartition(key string, ps *partState) {
	if c.parts == nil {
		c.parts = make(map[string]*partState)
		c.partIDs = make(map[string]*partState)
	}
	c.parts[key] = ps
	if ps != nil {
		c.partIDs[string(ps.rec.Id)] = ps
	}
}

// ensurePartition returns the partition, creating it.
func (c *applyCtx) ensurePartition(queue, name string) *partState {
	if ps := c.partition(queue, name); ps != nil {
		return ps
	}
	ps := &partState{dirty: true, rec: &command.PartitionRecord{
		Id: c.newID(), Queue: queue, Name: name, CreatedUs: c.now, NextSeq: 1, FirstSeq: 1,
	}}
	c.tx.Put(bPartitionIDs, ps.rec.Id, join(queue, name))
	c.cachePartition(string(join(queue, name)), ps)
	return ps
}

// partitionByID finds a partition by its UUID, or nil.
func (c *applyCtx) partitionByID(pid []byte) *partState {
	if ps, ok := c.partIDs[string(pid)]; ok {
		return ps
	}
	if len(pid) == 0 {
		return nil
	}
	v := c.tx.Get(bPartitionIDs, pid)
	if v == nil {
		return nil
	}
	q, p := splitJoined(v)
	return c.partition(q, p)
}

// cursor returns the (partition, group) state; rec is a new empty record
// (fresh) when none is stored.
func (c *applyCtx) cursor(pid []byte, group string) *cursorState {
	key := pidKey(pid, group)
	if cs, ok := c.cursors[string(key)]; ok {
		return cs
	}
	if c.cursors == nil {
		c.cursors = make(map[string]*cursorState)
	}
	cs := &cursorState{key: key, rec: &command.CursorRecord{}}
	if v := c.tx.Get(bCursors, key); v != nil {
		mustUnmarshal(v, cs.rec)
	} else {
		cs.fresh = true
	}
	c.cursors[string(key)] = cs
	return cs
}

// group returns the (queue, group) subscription, or a state with a nil
// record when the group never popped the queue.
func (c *applyCtx) group(queue, group string) *groupState {
	key := join(queue, group)
	if gs, ok := c.groups[string(key)]; ok {
		return gs
	}
	if c.groups == nil {
		c.groups = make(map[string]*groupState)
	}
	gs := &groupState{key: key}
	if v := c.tx.Get(bGroups, key); v != nil {
		gs.rec = &command.GroupRecord{}
		mustUnmarshal(v, gs.rec)
	}
	c.groups[string(key)] = gs
	return gs
}

// flush writes every changed cached record into the staged transaction.
func (c *applyCtx) flush() {
	for name, qs := range c.queues {
		if qs != nil && qs.dirty {
			c.tx.Put(bQueues, prefix(name), mustMarshal(qs.rec))
			qs.dirty = false
		}
	}
	for key, ps := range c.parts {
		if ps != nil && ps.dirty {
			c.tx.Put(bPartitions, []byte(key), mustMarshal(ps.rec))
			ps.dirty = false
		}
	}
	for _, cs := range c.cursors {
		if cs.dirty {
			c.tx.Put(bCursors, cs.key, mustMarshal(cs.rec))
			cs.dirty = false
		}
	}
	for _, gs := range c.groups {
		if gs.dirty && gs.rec != nil {
			c.tx.Put(bGroups, gs.key, mustMarshal(gs.rec))
			gs.dirty = false
		}
	}
}
