package fsm

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/store"
)

// Changes tells the node what a batch of entries changed, so that parked
// long-poll pops of those queues can look again.
type Changes struct {
	Queues map[string]struct{}
}

func (c *Changes) touch(queue string) {
	if c.Queues == nil {
		c.Queues = make(map[string]struct{})
	}
	c.Queues[queue] = struct{}{}
}

// Options configure an FSM.
type Options struct {
	Logger  *slog.Logger
	Metrics *Metrics // nil: no metrics
	// OnApplied is called after every committed batch, outside any lock.
	OnApplied func(index uint64, changes Changes)
}

// FSM is the replicated state machine: raft.FSM and raft.BatchingFSM over a
// store.DB. Only the Raft apply goroutine calls Apply, ApplyBatch, Snapshot
// and Restore; readers use Read at any time.
type FSM struct {
	db   *store.DB
	opts Options
	log  *slog.Logger

	// meta is the apply goroutine's copy of the stored MetaRecord.
	meta    *command.MetaRecord
	applied atomic.Uint64
	lastNow atomic.Int64
	// bytes of entries applied since the last snapshot
	sinceSnapshot atomic.Int64

	restoreMu sync.Mutex
}

// New opens the FSM over db, which already holds whatever was applied before
// a restart: entries at or below its applied index are skipped when Raft
// replays them.
func New(db *store.DB, opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &FSM{db: db, opts: opts, log: opts.Logger.With("component", "fsm")}
	if err := f.loadMeta(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) loadMeta() error {
	var meta *command.MetaRecord
	err := f.db.View(func(r store.Reader) (err error) {
		meta, err = readMeta(r, "state file "+f.db.Path())
		return err
	})
	if err != nil {
		return fmt.Errorf("fsm: %w", err)
	}
	f.meta = meta
	f.applied.Store(meta.AppliedIndex)
	f.lastNow.Store(meta.LastNowUs)
	return nil
}

// readMeta reads the meta record of a state (a new, empty one is of the
// current format). A state of another format is a *command.FormatError.
func readMeta(r store.Reader, what string) (*command.MetaRecord, error) {
	meta := &command.MetaRecord{StateFormat: command.StateFormat}
	v := r.Get(bMeta, metaKey)
	if v == nil {
		return meta, nil
	}
	meta.Reset()
	if err := proto.Unmarshal(v, meta); err != nil {
		return nil, fmt.Errorf("%s: meta record does not decode: %w", what, err)
	}
	if meta.StateFormat != command.StateFormat {
		return nil, &command.FormatError{What: what, Found: max(meta.StateFormat, 1), Supported: command.StateFormat}
	}
	return meta, nil
}

// AppliedIndex is the index of the last entry whose effects are committed.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// BytesSinceSnapshot is the size of the entries applied since the last
// snapshot was taken.
func (f *FSM) BytesSinceSnapshot() int64 { return f.sinceSnapshot.Load() }

// LastNow is the effective time (µs) of the last applied command.
func (f *FSM) LastNow() int64 { return f.lastNow.Load() }

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in one store transaction: their data
// and the new applied index reach the disk together, with one fsync.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	var changes Changes
	meta := proto.Clone(f.meta).(*command.MetaRecord)
	start := time.Now()
	var size int64
	for _, l := range logs {
		size += int64(len(l.Data))
	}
	f.sinceSnapshot.Add(size)
	err := f.db.Update(func(b *store.Batch) error {
		for i, l := range logs {
			if l.Index <= meta.AppliedIndex {
				continue // applied before a restart
			}
			meta.AppliedIndex = l.Index
			if l.Type != raft.LogCommand {
				continue
			}
			cmd, err := command.Decode(l.Data, fmt.Sprintf("log entry %d", l.Index))
			if err != nil {
				// An entry this replica cannot read (corrupt, or of a format
				// it does not know) must stop it rather than let it diverge
				// from the others.
				panic("fsm: " + err.Error())
			}
			now := cmd.StampUs
			if now <= meta.LastNowUs {
				now = meta.LastNowUs + 1
			}
			meta.LastNowUs = now
			resp[i] = f.applyCommand(b, cmd, l.Index, now, meta, &changes)
		}
		v, err := proto.Marshal(meta)
		if err != nil {
			return err
		}
		return b.Put(bMeta, metaKey, v)
	})
	if err != nil {
		// The file could not take the batch; it cannot be trusted to match
		// the log any more.
		panic(fmt.Sprintf("fsm: commit batch ending at %d: %v", logs[len(logs)-1].Index, err))
	}
	f.meta = meta
	f.applied.Store(meta.AppliedIndex)
	f.lastNow.Store(meta.LastNowUs)
	if m := f.opts.Metrics; m != nil {
		m.batchSeconds.Observe(time.Since(start).Seconds())
		m.batchEntries.Observe(float64(len(logs)))
	}
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(meta.AppliedIndex, changes)
	}
	return resp
}

// applyCommand runs one command in its own staged transaction and commits
// it, or discards it when the handler refuses the command as a whole.
func (f *FSM) applyCommand(b *store.Batch, cmd *command.Command, index uint64, now int64,
	meta *command.MetaRecord, changes *Changes) proto.Message {
	h := handlerFor(cmd)
	if h == nil {
		if cmd.Skippable {
			return nil
		}
		panic(fmt.Sprintf("fsm: entry %d has a command this node does not know", index))
	}
	if rp := idempotency.Replay(b.Reader(), cmd, now); rp != nil {
		return rp // the key was seen before: nothing is applied
	}
	c := newApplyCtx(b.Begin(), index, now, meta, changes)
	start := time.Now()
	res, keep := f.runHandler(h, c, cmd)
	if m := f.opts.Metrics; m != nil {
		m.applySeconds.WithLabelValues(h.name).Observe(time.Since(start).Seconds())
	}
	if !keep {
		c.tx.Discard()
	} else if err := c.tx.Commit(); err != nil {
		// A failed commit cannot be undone inside the batch, so it is fatal,
		// never a value: the batch panics and the node restarts from the log.
		panic(fmt.Sprintf("fsm: entry %d: %v", index, err))
	} else {
		c.commitChanges()
	}
	idempotency.Remember(b, cmd, now, res)
	return res
}

// runHandler runs h and flushes its cached records into the staged
// transaction. A deterministic panic discards the command on every replica
// alike, so the replicas stay equal and the node stays up.
func (f *FSM) runHandler(h *handler, c *applyCtx, cmd *command.Command) (res proto.Message, keep bool) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("command panicked; its writes were discarded", "index", c.index, "op", h.name, "panic", r)
			if m := f.opts.Metrics; m != nil {
				m.applyPanics.Inc()
			}
			res, keep = &command.Response{InternalError: fmt.Sprint("internal error: ", r)}, false
		}
	}()
	res, keep = h.apply(c, cmd)
	if keep {
		c.flush()
	}
	return res, keep
}

// Read runs fn on a consistent view of the state as of a whole applied
// batch: a reader never sees part of an entry's writes.
func (f *FSM) Read(fn func(r *Reader) error) error {
	return f.db.View(func(sr store.Reader) error { return fn(&Reader{r: sr}) })
}

// Snapshot pins the current state; Persist streams it while Apply goes on.
// It first syncs the state file: Raft may truncate its log up to this
// snapshot, so the file must hold everything up to here durably
// (DESIGN.md, the storage trap).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.db.Sync(); err != nil {
		return nil, fmt.Errorf("fsm: sync before snapshot: %w", err)
	}
	f.sinceSnapshot.Store(0)
	snap, err := f.db.BeginSnapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{snap: snap, index: f.AppliedIndex(), log: f.log, metrics: f.opts.Metrics}, nil
}

// Restore replaces the whole state with a snapshot's, atomically for readers.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.restoreMu.Lock()
	defer f.restoreMu.Unlock()
	start := time.Now()
	check := func(r store.Reader) error { _, err := readMeta(r, "snapshot"); return err }
	if err := f.db.Restore(rc, check); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if err := f.loadMeta(); err != nil {
		return err
	}
	f.log.Info("restored state from snapshot", "applied", f.AppliedIndex(), "took", time.Since(start))
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(f.AppliedIndex(), Changes{Queues: map[string]struct{}{"*": {}}})
	}
	return nil
}

type fsmSnapshot struct {
	snap    *store.Snapshot
	index   uint64
	log     *slog.Logger
	metrics *Metrics
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	n, err := s.snap.WriteTo(sink)
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	s.log.Info("persisted snapshot", "index", s.index, "bytes", n, "took", time.Since(start))
	if s.metrics != nil {
		s.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
		s.metrics.snapshotBytes.Set(float64(n))
	}
	return nil
}

func (s *fsmSnapshot) Release() { s.snap.Release() }
