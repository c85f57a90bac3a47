package raftlog

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
)

// byteCache keeps the most recent log entries in memory, up to a byte
// budget, so that replication to followers that keep up reads memory
// instead of the log file. It differs from raft.LogCache in two ways that
// matter for a broker whose entries carry batches of payloads: it is
// bounded in bytes, not entries (1024 entries of 16 MiB pushes would be
// 16 GiB), and it caches copies of the entries: raft hands StoreLogs
// pointers into its futures, and caching those would keep every cached
// entry's apply result alive as well.
type byteCache struct {
	raft.LogStore
	mu     sync.Mutex
	budget int
	size   int
	logs   map[uint64]*raft.Log
	first  uint64 // lowest cached index (0 = empty)
	last   uint64
	// floor is the log's first index as its head truncations left it:
	// raft-wal drops whole segment files only, and still reads an entry
	// below its first index from the tail segment, which would let a
	// leader replicate entries it compacted away instead of sending its
	// snapshot. Nothing below floor is served.
	floor uint64
	// onCorrupt is told of a damaged command entry read from the store.
	onCorrupt func(error)
}

func newByteCache(store raft.LogStore, budget int) (*byteCache, error) {
	first, err := store.FirstIndex()
	if err != nil {
		return nil, err
	}
	return &byteCache{LogStore: store, budget: budget, logs: map[uint64]*raft.Log{}, floor: first}, nil
}

func (c *byteCache) GetLog(index uint64, out *raft.Log) error {
	c.mu.Lock()
	l, ok := c.logs[index]
	below := index < c.floor
	c.mu.Unlock()
	if below {
		return raft.ErrLogNotFound
	}
	if ok {
		*out = *l
		return nil
	}
	if err := c.LogStore.GetLog(index, out); err != nil {
		return err
	}
	return c.check(out)
}

// check verifies the checksum of a command entry read from the store (the
// cached ones are copies of what this node received). A damaged one is
// reported and answered as not found: a leader sends its snapshot instead
// (raft's answer to a missing entry), and nothing applies it.
func (c *byteCache) check(l *raft.Log) error {
	if l.Type != raft.LogCommand {
		return nil
	}
	if err := command.CheckEntry(l.Data); err != nil {
		if c.onCorrupt != nil {
			c.onCorrupt(fmt.Errorf("raft log entry %d: %w", l.Index, err))
		}
		*l = raft.Log{}
		return raft.ErrLogNotFound
	}
	return nil
}

func (c *byteCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *byteCache) StoreLogs(logs []*raft.Log) error {
	if err := c.closeGap(logs); err != nil {
		return err
	}
	if err := c.LogStore.StoreLogs(logs); err != nil {
		c.reset() // the store may hold some of them: forget what we think we know
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.first != 0 && l.Index != c.last+1 {
			c.resetLocked() // a gap or an overwrite (a new leader's log): start over
		}
		cp := *l
		c.logs[l.Index] = &cp
		c.size += len(l.Data) + len(l.Extensions)
		if c.first == 0 {
			c.first = l.Index
		}
		c.last = l.Index
	}
	for c.size > c.budget && c.first != 0 && c.first <= c.last {
		if old, ok := c.logs[c.first]; ok {
			c.size -= len(old.Data) + len(old.Extensions)
			delete(c.logs, c.first)
		}
		c.first++
	}
	if c.first > c.last {
		c.resetLocked()
	}
	return nil
}

func (c *byteCache) DeleteRange(min, max uint64) error {
	c.reset()
	if err := c.LogStore.DeleteRange(min, max); err != nil {
		return err
	}
	first, err := c.LogStore.FirstIndex()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.floor = first
	c.mu.Unlock()
	return nil
}

func (c *byteCache) reset() {
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
}

func (c *byteCache) resetLocked() {
	c.logs = map[uint64]*raft.Log{}
	c.size, c.first, c.last = 0, 0, 0
}

// closeGap empties the log when logs start past its end. Raft leaves such a
// gap only after a snapshot restore on a leader (raft.Restore moves the
// last index past the snapshot without writing entries), so everything
// before it is covered by that snapshot; raft-wal refuses a log with a gap
// ("non-monotonic log entries"), hashicorp/raft#545 did the same for a
// restore at start.
func (c *byteCache) closeGap(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	last, err := c.LogStore.LastIndex()
	if err != nil || last == 0 || logs[0].Index <= last+1 {
		return err
	}
	first, err := c.LogStore.FirstIndex()
	if err != nil {
		return err
	}
	return c.DeleteRange(first, last)
}
