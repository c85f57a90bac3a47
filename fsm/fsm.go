package fsm

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/audit"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/damage"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/queue"
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

// LogID names the Raft log an FSM applies. Ids the state machine derives
// from log indexes (queues, partitions) mix it in, so that two logs (Raft
// groups) never mint the same id.
const LogID = "0"

// GroupLogID is the LogID of Raft group g: group 0's is LogID, so one
// group is today's log.
func GroupLogID(g int) string {
	if g == 0 {
		return LogID
	}
	return LogID + "/" + strconv.Itoa(g)
}

// How often the node commits the state file (store.Options.CommitEvery,
// CommitAfter): once per CommitEvery apply batches, or CommitAfter,
// whichever comes first. Its commits rewrite the same few pages batch
// after batch under small commands, and a crash replays the uncommitted
// batches from the Raft log (DESIGN.md, "Fewer, larger commits").
const (
	CommitEvery = 32
	CommitAfter = 100 * time.Millisecond
)

// Options configure an FSM.
type Options struct {
	// LogID names the log (GroupLogID); "" = LogID.
	LogID   string
	Logger  *slog.Logger
	Metrics *Metrics // nil: no metrics
	// OnApplied is called after every committed batch, outside any lock.
	OnApplied func(index uint64, changes Changes)
	// AwaitSpace, when set, is called before every batch and returns when
	// the disk has room for it (package diskspace): a full disk pauses
	// apply where it is instead of failing a commit halfway. false means
	// the node stops with the disk still full: the FSM halts (see halted).
	AwaitSpace func() bool
	// Keys open the payloads that read views hand out (package atrest);
	// nil = a node without a key file, which opens only plaintext.
	Keys *atrest.Keyring
	// Damage is told of every damaged read of the message files and of
	// every log entry whose checksum fails; nil = not reported (apply still
	// halts).
	Damage *damage.Report
	// OnStateCheck is called on the apply goroutine right after the batch
	// that ends with a state_check entry (the FSM ends a batch there): view
	// reads the state as of that entry until release is called, which the
	// callee must do (statecheck.go). nil = checks are applied and ignored.
	OnStateCheck func(index uint64, view store.Reader, release func())
}

// FSM is the replicated state machine: raft.FSM and raft.BatchingFSM over a
// store.DB (the records) and a msgstore.Store (the message bodies). Only the
// Raft apply goroutine calls Apply, ApplyBatch, Snapshot and Restore;
// readers use Read at any time.
type FSM struct {
	db    *store.DB
	msgs  *msgstore.Store
	queue *queue.Domain
	opts  Options
	log   *slog.Logger

	// meta is the apply goroutine's copy of the stored MetaRecord.
	meta    *command.MetaRecord
	applied atomic.Uint64
	lastNow atomic.Int64
	// bytes of entries applied since the last snapshot
	sinceSnapshot atomic.Int64
	// halted: apply stopped for good in this process (AwaitSpace said
	// false, or a batch read damaged bytes); Snapshot refuses, since Raft
	// would label the state with entries it does not hold.
	halted atomic.Bool

	restoreMu sync.Mutex
	// keyless: the one warning of a node without a key file that holds a
	// queue with encryptionEnabled
	keyless sync.Once

	skippedMu sync.Mutex
	skipped   []uint64 // the last entries skipped as of a kind this node does not know

	// flows are the per-minute counts of what entries did (flows.go)
	flows *Flows
	// tenants are meta.Tenants as of the last applied batch, for readers
	tenants atomic.Pointer[[]string]

	// undone are the message batches applied since the state file last
	// committed (store.Options.CommitEvery): the files they remove
	// (retention, deleted queues) go only once the state that no longer
	// needs them is in the file, so that a crash never leaves a state file
	// naming records whose files are gone. Under undoneMu, which a batch
	// holds while it applies, so that FlushStale never runs beside one.
	undoneMu sync.Mutex
	undone   []*msgstore.Batch
}

// maxSkipped bounds the skipped entries the FSM remembers for /health.
const maxSkipped = 16

func (f *FSM) noteSkipped(index uint64) {
	f.skippedMu.Lock()
	defer f.skippedMu.Unlock()
	f.skipped = append(f.skipped, index)
	if len(f.skipped) > maxSkipped {
		f.skipped = f.skipped[len(f.skipped)-maxSkipped:]
	}
}

// Skipped lists the last entries this node skipped because they were of a
// kind it does not know and marked skippable (a newer node's), newest last.
func (f *FSM) Skipped() []uint64 {
	f.skippedMu.Lock()
	defer f.skippedMu.Unlock()
	return append([]uint64{}, f.skipped...)
}

// Halted reports whether apply stopped for good in this process (the node
// is stopping with its data disk full).
func (f *FSM) Halted() bool { return f.halted.Load() }

// New opens the FSM over db and msgs, which already hold whatever was
// applied before a restart: entries at or below its applied index are
// skipped when Raft replays them. Message files of partitions the state
// does not know (a batch that never committed) are removed.
func New(db *store.DB, msgs *msgstore.Store, opts Options) (*FSM, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LogID == "" {
		opts.LogID = LogID
	}
	f := &FSM{db: db, msgs: msgs, queue: queue.New(opts.LogID, msgs), opts: opts, log: opts.Logger.With("component", "fsm")}
	msgs.OnCorrupt(func(err error) { opts.Damage.Note(damage.MessageFiles, err) })
	if err := f.loadMeta(); err != nil {
		return nil, err
	}
	f.flows = newFlows(f.meta.LastNowUs)
	if opts.Metrics != nil {
		opts.Metrics.conflated.fsm.Store(f)
	}
	err := db.View(func(r store.Reader) error {
		if opts.Keys == nil {
		keyless:
			for _, key := range tenantKeys(f.meta) {
				for _, q := range f.queue.Reader(ScopeOf(key).Reader(r)).Queues() {
					if q.GetOptions().GetEncryptionEnabled() {
						f.warnKeyless(q.Name)
						break keyless
					}
				}
			}
		}
		err := msgs.RemoveOrphans(func(name string) bool {
			pid, ok := msgstore.PartitionID(name)
			return ok && f.liveAnywhere(r, f.meta, pid)
		})
		if err != nil {
			return err
		}
		return msgs.RemoveBelow(f.committedAll(r, f.meta))
	})
	if err != nil {
		return nil, fmt.Errorf("fsm: %w", err)
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
	f.publishTenants(meta)
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
	if !command.ReadsStateFormat(meta.StateFormat) {
		return nil, &command.FormatError{What: what, Found: max(meta.StateFormat, 1), Supported: command.StateFormat}
	}
	// A state of the format before: its message files were migrated when
	// the store opened or the snapshot's were restored; the next batch
	// records the format.
	meta.StateFormat = command.StateFormat
	return meta, nil
}

// AppliedIndex is the index of the last entry whose effects are committed.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// BytesSinceSnapshot is the size of the entries applied since the last
// snapshot was taken.
func (f *FSM) BytesSinceSnapshot() int64 { return f.sinceSnapshot.Load() }

// warnKeyless says once that this node, having no key file, keeps the
// payloads of queues with encryptionEnabled in plaintext (spec §5.12).
func (f *FSM) warnKeyless(queue string) {
	f.keyless.Do(func() {
		f.log.Warn("a queue has encryptionEnabled, but this node has no --encryption-keys: its payloads are stored in plaintext", "queue", queue)
	})
}

// SealingKeys names the encryption keys the applied state's payloads were
// sealed with (for the start-up check; the apply goroutine's view).
func (f *FSM) SealingKeys() []string { return append([]string(nil), f.meta.SealingKeys...) }

// LastNow is the effective time (µs) of the last applied command.
func (f *FSM) LastNow() int64 { return f.lastNow.Load() }

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in one store transaction: their data
// and the new applied index are committed together. The state file is not
// fsynced per commit (store.DeferSync): the Raft log holds every entry, so
// a crash replays what the file lost; it is synced before a snapshot lets
// Raft truncate the log (Snapshot).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	if f.halted.Load() || (f.opts.AwaitSpace != nil && !f.opts.AwaitSpace()) {
		// Stopping with a full disk: apply nothing more. The entries stay
		// in the log and are applied after the restart (the state's
		// applied index did not move), and no snapshot claims them.
		if !f.halted.Swap(true) {
			f.log.Warn("apply halted: the node stops with its data disk full", "first_unapplied", logs[0].Index)
		}
		return resp
	}
	cmds, err := f.decode(logs)
	if err != nil {
		return resp
	}
	if i := checkPoint(cmds); i >= 0 && i < len(logs)-1 {
		// A state check is a point every replica must digest the state
		// at: the batch ends there, whatever Raft handed over with it.
		return append(f.ApplyBatch(logs[:i+1]), f.ApplyBatch(logs[i+1:])...)
	}
	f.undoneMu.Lock()
	defer f.undoneMu.Unlock()
	var changes Changes
	meta := proto.Clone(f.meta).(*command.MetaRecord)
	start := time.Now()
	var size int64
	for _, l := range logs {
		size += int64(len(l.Data))
	}
	f.sinceSnapshot.Add(size)
	msgs := f.msgs.Begin()
	err = f.db.Update(func(b *store.Batch) error {
		for i, l := range logs {
			if l.Index <= meta.AppliedIndex {
				continue // applied before a restart
			}
			meta.AppliedIndex = l.Index
			cmd := cmds[i]
			if cmd == nil {
				continue
			}
			now := cmd.StampUs
			if now <= meta.LastNowUs {
				now = meta.LastNowUs + 1
			}
			meta.LastNowUs = now
			resp[i] = f.applyCommand(b, msgs, cmd, l.Index, l.Term, now, meta, &changes)
			if err := msgs.Damaged(); err != nil {
				return err // the other replicas read the bytes as written
			}
		}
		// The message files before the state file: a crash between the two
		// leaves records the state does not know, which are trimmed.
		if err := msgs.Flush(); err != nil {
			return err
		}
		v, err := proto.Marshal(meta)
		if err != nil {
			return err
		}
		return b.Put(bMeta, metaKey, v)
	})
	if errors.Is(err, store.ErrCorrupt) {
		// A command read a record of the state file that fails its
		// checksum: as with damaged message files, nothing of the batch is
		// kept and apply stops here.
		f.opts.Damage.Note(damage.StateFile, err)
		f.halt("a command read a damaged record of the state file", logs[0].Index, err)
		return make([]interface{}, len(logs))
	}
	if err != nil && msgs.Damaged() != nil {
		// A command read damaged message bytes: its outcome could differ
		// from the other replicas'. Nothing of the batch is kept (the store
		// takes no more writes), and apply stops here; the node stays up
		// to say why (/health) and serves what is intact.
		f.halt("a command read damaged message files", logs[0].Index, err)
		return make([]interface{}, len(logs))
	}
	if err != nil {
		// The file could not take the batch; it cannot be trusted to match
		// the log any more.
		panic(fmt.Sprintf("fsm: commit batch ending at %d: %v", logs[len(logs)-1].Index, err))
	}
	f.undone = append(f.undone, msgs)
	if f.db.Pending() == 0 {
		f.releaseUndone()
	}
	f.flows.publish()
	f.meta = meta
	f.publishTenants(meta)
	f.applied.Store(meta.AppliedIndex)
	f.lastNow.Store(meta.LastNowUs)
	if m := f.opts.Metrics; m != nil {
		m.batchSeconds.Observe(time.Since(start).Seconds())
		m.batchEntries.Observe(float64(len(logs)))
	}
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(meta.AppliedIndex, changes)
	}
	if last := len(logs) - 1; cmds[last] != nil && cmds[last].GetStateCheck() != nil && logs[last].Index == meta.AppliedIndex {
		f.pinCheck(meta.AppliedIndex)
	}
	return resp
}

// checkPoint is the position of the first state check among cmds, or -1.
func checkPoint(cmds []*command.Command) int {
	for i, c := range cmds {
		if c != nil && c.GetStateCheck() != nil {
			return i
		}
	}
	return -1
}

// decode reads the commands of a batch's entries (nil for Raft's own
// entries and for those applied before a restart), before anything is
// applied. An entry whose checksum fails halts apply, the node saying why
// (its copy of the log is damaged; the other replicas hold the entry as
// written); one this node cannot read otherwise (of a format it does not
// know) stops it rather than let it diverge.
func (f *FSM) decode(logs []*raft.Log) ([]*command.Command, error) {
	cmds := make([]*command.Command, len(logs))
	for i, l := range logs {
		if l.Index <= f.meta.AppliedIndex || l.Type != raft.LogCommand {
			continue
		}
		cmd, err := command.Decode(l.Data, fmt.Sprintf("log entry %d", l.Index))
		if errors.Is(err, command.ErrCorruptEntry) {
			f.opts.Damage.Note(damage.RaftLog, err)
			f.halt("a log entry is damaged", l.Index, err)
			return nil, err
		}
		if err != nil {
			panic("fsm: " + err.Error())
		}
		cmds[i] = cmd
	}
	return cmds, nil
}

// halt stops apply for good in this process, at first (the first entry
// not applied).
func (f *FSM) halt(why string, first uint64, err error) {
	if !f.halted.Swap(true) {
		f.log.Error("apply halted: "+why, "first_unapplied", first, "error", err)
	}
}

// releaseUndone lets the message batches the state file has committed
// remove what they dropped. The caller holds undoneMu.
func (f *FSM) releaseUndone() {
	for _, b := range f.undone {
		b.Done()
	}
	f.undone = f.undone[:0]
}

// Flush commits to the state file every batch applied and lets their
// message batches remove what they dropped (before the node closes the
// files). No batch may be applied meanwhile.
func (f *FSM) Flush() error {
	f.undoneMu.Lock()
	defer f.undoneMu.Unlock()
	if err := f.db.Flush(); err != nil {
		return err
	}
	f.releaseUndone()
	return nil
}

// FlushStale is Flush when the oldest uncommitted batch has waited the
// state file's CommitAfter: the node calls it on a timer, so that a node
// that stops applying still commits its last batches and removes what they
// dropped. Safe beside apply.
func (f *FSM) FlushStale() error {
	f.undoneMu.Lock()
	defer f.undoneMu.Unlock()
	if err := f.db.FlushStale(); err != nil {
		return err
	}
	if f.db.Pending() == 0 {
		f.releaseUndone()
	}
	return nil
}

// applyCommand runs one command in its own staged transaction and commits
// it, or discards it when the handler refuses the command as a whole.
func (f *FSM) applyCommand(b *store.Batch, msgs *msgstore.Batch, cmd *command.Command, index, term uint64, now int64,
	meta *command.MetaRecord, changes *Changes) proto.Message {
	k := KindOf(cmd)
	if k == nil {
		if cmd.Skippable {
			f.noteSkipped(index)
			return nil
		}
		panic(fmt.Sprintf("fsm: entry %d has a command this node does not know", index))
	}
	if err := validTenant(cmd.Tenant); err != nil {
		return &command.Response{InternalError: err.Error()} // a front end checks it first: a node's own bug
	}
	noteTenant(meta, cmd.Tenant)
	b = b.In(ScopeOf(cmd.Tenant))
	if rp := idempotency.Replay(b.Reader(), cmd, now); rp != nil {
		return rp // the key was seen before: nothing is applied
	}
	c := &applyCtx{tx: b.Begin(), index: index, term: term, now: now, meta: meta}
	c.q = f.queue.Begin(c.tx, msgs, index, now)
	start := time.Now()
	res, keep := f.runHandler(k, c, cmd)
	if m := f.opts.Metrics; m != nil {
		m.applySeconds.WithLabelValues(k.Name).Observe(time.Since(start).Seconds())
	}
	if !keep {
		c.tx.Discard()
		c.q.Discard()
	} else {
		c.q.Keep()
		if !meta.DeadLettersIndexed && c.q.FirstDeadLetter() {
			meta.DeadLettersIndexed = true // nothing stored before the index to backfill
		}
		if action, detail := k.Audit(cmd); action != "" {
			audit.Record(c.tx, index, &command.AuditRecord{AtUs: now, Actor: cmd.Actor, Action: action, Detail: detail},
				&meta.AuditRecords)
		}
		if f.opts.Keys == nil && cmd.GetConfigure().GetOptions().GetEncryptionEnabled() {
			f.warnKeyless(cmd.GetConfigure().Queue)
		}
		if k.carries {
			f.noteKeys(k, cmd, index, meta)
		}
		if err := c.tx.Commit(); err != nil {
			// A failed commit cannot be undone inside the batch, so it is
			// fatal, never a value: the batch panics and the node restarts
			// from the log.
			panic(fmt.Sprintf("fsm: entry %d: %v", index, err))
		}
		for _, q := range c.q.Touched() {
			changes.touch(QueueKey(cmd.Tenant, q))
		}
		f.flows.stage(cmd.Tenant, now, c.q.Flows(), res)
		if c.all {
			changes.touch("*")
		}
	}
	idempotency.Remember(b, cmd, now, res)
	return res
}

// noteKeys records in meta the keys cmd's sealed payloads name, and says
// so when this node's key file lacks one.
func (f *FSM) noteKeys(k *Kind, cmd *command.Command, index uint64, meta *command.MetaRecord) {
	each := func(push func(*command.PushItem), timer func(*command.TimerOp)) { k.Payloads(cmd, push, timer) }
	for _, name := range atrest.NoteKeys(each, &meta.SealingKeys) {
		if !f.opts.Keys.Has(name) {
			f.log.Error("an entry holds payloads encrypted with a key this node's key file lacks: it cannot serve them",
				"key", name, "index", index)
		}
	}
}

// runHandler runs k's handler and flushes its cached records into the staged
// transaction. A deterministic panic discards the command on every replica
// alike, so the replicas stay equal and the node stays up.
func (f *FSM) runHandler(k *Kind, c *applyCtx, cmd *command.Command) (res proto.Message, keep bool) {
	defer func() {
		if r := recover(); r != nil {
			if ce, ok := r.(*store.CorruptError); ok {
				panic(ce) // not the command's doing: the batch fails (ApplyBatch halts)
			}
			f.log.Error("command panicked; its writes were discarded", "index", c.index, "op", k.Name, "panic", r)
			if m := f.opts.Metrics; m != nil {
				m.applyPanics.Inc()
			}
			res, keep = &command.Response{InternalError: fmt.Sprint("internal error: ", r)}, false
			if t := cmd.GetTransaction(); t != nil { // a transaction's refusals are verdicts (addendum §4.5)
				res = &command.TxnResult{TransactionId: t.TransactionId, Reason: command.Reason_INTERNAL,
					Error: fmt.Sprint("internal error: ", r), FailedIndex: -1}
			}
		}
	}()
	return k.Apply(c, cmd)
}

// Read runs fn on a consistent view of the state as of a whole applied
// batch: a reader never sees part of an entry's writes.
func (f *FSM) Read(fn func(r *Reader) error) error { return f.ReadAs("", fn) }

// ReadAs is Read of one tenant's state (its tenant.Key).
func (f *FSM) ReadAs(tenantKey string, fn func(r *Reader) error) error {
	err := f.db.View(func(sr store.Reader) error { return fn(f.reader(sr, tenantKey)) })
	if errors.Is(err, store.ErrCorrupt) {
		f.opts.Damage.Note(damage.StateFile, err)
	}
	return err
}

// Snapshot pins the current state; Persist streams it while Apply goes on.
// It first syncs the state file and the message files: Raft may truncate
// its log up to this snapshot, so both must hold everything up to here
// durably (DESIGN.md, the storage trap).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.halted.Load() {
		return nil, errors.New("fsm: apply halted (a full disk at shutdown, or damaged files): no snapshot")
	}
	if err := f.db.Sync(); err != nil {
		return nil, fmt.Errorf("fsm: sync before snapshot: %w", err)
	}
	f.undoneMu.Lock()
	f.releaseUndone() // Sync committed every batch
	f.undoneMu.Unlock()
	if err := f.msgs.Sync(); err != nil {
		return nil, fmt.Errorf("fsm: sync before snapshot: %w", err)
	}
	f.sinceSnapshot.Store(0)
	snap, err := f.db.BeginSnapshot()
	if err != nil {
		return nil, err
	}
	frozen, err := f.msgs.Freeze(f.committedAll(snap.Reader(), f.meta))
	if err != nil {
		snap.Release()
		return nil, err
	}
	return &fsmSnapshot{snap: snap, frozen: frozen, index: f.AppliedIndex(), log: f.log, metrics: f.opts.Metrics}, nil
}

// Snapshot stream: a tar of the state file's image, then every committed
// message file (its committed part).
const (
	snapshotState    = "state.db"
	snapshotMessages = "messages/"
)

// Restore replaces the whole state with a snapshot's, atomically for
// readers. The message files are swapped just before the state file, under
// its lock: a crash between the two leaves the old state file, whose
// applied index is below the snapshot's, so the node restores again at
// start.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.restoreMu.Lock()
	defer f.restoreMu.Unlock()
	start := time.Now()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Name != snapshotState {
		return fmt.Errorf("fsm: restore: not a snapshot of state format %d (first entry: %v)", command.StateFormat, nameOr(h, err))
	}
	check := func(r store.Reader) error { _, err := readMeta(r, "snapshot"); return err }
	pending, err := f.db.PrepareRestore(tr, check)
	if err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	files, err := f.msgs.BeginRestore()
	if err != nil {
		pending.Abort()
		return err
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && !strings.HasPrefix(h.Name, snapshotMessages) {
			err = fmt.Errorf("unexpected entry %q", h.Name)
		}
		if err == nil {
			err = files.Add(strings.TrimPrefix(h.Name, snapshotMessages), tr)
		}
		if err != nil {
			files.Abort()
			pending.Abort()
			return fmt.Errorf("fsm: restore: %w", err)
		}
	}
	if err := pending.Commit(files.Commit); err != nil {
		return fmt.Errorf("fsm: restore: %w", err)
	}
	f.undoneMu.Lock()
	f.undone = nil // the batches of the state replaced: their removals went with it
	f.undoneMu.Unlock()
	f.queue.Reset()
	if err := f.loadMeta(); err != nil {
		return err
	}
	f.flows.reset(f.meta.LastNowUs)
	f.log.Info("restored state from snapshot", "applied", f.AppliedIndex(), "took", time.Since(start))
	if f.opts.OnApplied != nil {
		f.opts.OnApplied(f.AppliedIndex(), Changes{Queues: map[string]struct{}{"*": {}}})
	}
	return nil
}

// VerifySnapshot reads a snapshot as Restore would, without touching this
// FSM: the state image must open and be of this code's state format, and
// every other entry must be message files. It returns the image's meta
// record. dir holds a temporary copy of the image while it is checked.
// A restore of an operator's backup runs it first, because Raft stops a
// node whose FSM refuses a snapshot it was told to install.
func VerifySnapshot(r io.Reader, dir string) (*command.MetaRecord, error) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil || h.Name != snapshotState {
		return nil, fmt.Errorf("not a snapshot of state format %d (first entry: %v)", command.StateFormat, nameOr(h, err))
	}
	tmp, err := os.CreateTemp(dir, "verify-*.db")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, tr)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("state image: %w", err)
	}
	var meta *command.MetaRecord
	if err := store.Probe(tmp.Name(), func(r store.Reader) error {
		meta, err = readMeta(r, "snapshot")
		return err
	}); err != nil {
		return nil, err
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return meta, nil
		}
		if err == nil && !strings.HasPrefix(h.Name, snapshotMessages) {
			err = fmt.Errorf("unexpected entry %q", h.Name)
		}
		if err == nil {
			_, err = io.Copy(io.Discard, tr)
		}
		if err != nil {
			return nil, fmt.Errorf("message files: %w", err)
		}
	}
}

func nameOr(h *tar.Header, err error) string {
	if err != nil {
		return err.Error()
	}
	return h.Name
}

type fsmSnapshot struct {
	snap    *store.Snapshot
	frozen  *msgstore.Frozen
	index   uint64
	log     *slog.Logger
	metrics *Metrics
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	cw := &countingWriter{w: sink}
	tw := tar.NewWriter(cw)
	err := tw.WriteHeader(&tar.Header{Name: snapshotState, Mode: 0o600, Size: s.snap.Size(), Typeflag: tar.TypeReg})
	if err == nil {
		_, err = s.snap.WriteTo(tw)
	}
	if err == nil {
		err = s.frozen.WriteTar(tw, snapshotMessages)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	s.log.Info("persisted snapshot", "index", s.index, "bytes", cw.n, "took", time.Since(start))
	if s.metrics != nil {
		s.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
		s.metrics.snapshotBytes.Set(float64(cw.n))
	}
	return nil
}

func (s *fsmSnapshot) Release() {
	s.snap.Release()
	s.frozen.Release()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
