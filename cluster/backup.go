package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/backup"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// Backup and restore of a running cluster (package backup has the file).

// ErrBadBackup: a restore was given a file that is not a backup this node
// can install (not a backup, truncated, corrupted, of another format).
// Nothing was changed.
var ErrBadBackup = errors.New("cluster: bad backup")

// Backup writes a consistent backup of the cluster's state to w: first a
// linearizable barrier (this node has applied every entry committed before
// the call, so everything acknowledged before it is in), then a Raft
// snapshot of this node's state. It runs on any node.
func (n *Node) Backup(ctx context.Context, w io.Writer, version string) (backup.Header, error) {
	var h backup.Header
	if err := n.Read(ctx, Linearizable, func(*fsm.Reader) error { return nil }); err != nil {
		return h, err
	}
	meta, rc, err := n.snapshotNow()
	if err != nil {
		return h, fmt.Errorf("cluster: backup: snapshot: %w", err)
	}
	defer rc.Close()
	h = backup.Header{LogFormat: command.LogFormat, StateFormat: command.StateFormat, Index: meta.Index,
		Term: meta.Term, Size: meta.Size, CreatedAt: time.Now().UTC(), NodeID: n.cfg.NodeID, Version: version}
	if n.cfg.Groups > 1 {
		h.Group, h.Groups = n.cfg.Group, n.cfg.Groups
	}
	n.log.Info("writing a backup", "index", meta.Index, "bytes", meta.Size)
	return h, backup.Write(w, h, rc)
}

// snapshotNow takes a snapshot of the state as applied now; when nothing
// was applied since the newest snapshot, that one is current.
func (n *Node) snapshotNow() (*raft.SnapshotMeta, io.ReadCloser, error) {
	f := n.raft.Snapshot()
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			meta, rc, err := n.stores.LatestSnapshot()
			if err == nil && meta == nil {
				err = errors.New("no snapshot")
			}
			return meta, rc, err
		}
		return nil, nil, err
	}
	return f.Open()
}

// Restore replaces the cluster's state with a backup read from r (a POST
// body): r is spooled into the data dir and verified whole (checksum,
// formats, the snapshot itself) before anything changes, then installed
// with Raft's restore, which makes it a snapshot at a new index that every
// follower and later joiner installs. It runs on the leader only
// (ErrNotLeader elsewhere). The cluster keeps its own membership.
func (n *Node) Restore(ctx context.Context, r io.Reader) (backup.Header, uint64, error) {
	var h backup.Header
	if n.raft.State() != raft.Leader {
		return h, 0, ErrNotLeader
	}
	spool, err := os.CreateTemp(n.cfg.DataDir, "restore-*.qnb")
	if err != nil {
		return h, 0, err
	}
	defer os.Remove(spool.Name())
	_, err = io.Copy(spool, r)
	if cerr := spool.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return h, 0, fmt.Errorf("cluster: restore: receiving the backup: %w", err)
	}
	b, err := backup.Open(spool.Name())
	if err != nil {
		return h, 0, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	defer b.Close()
	h = b.Header
	if err := n.installs(b); err != nil {
		return h, 0, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	if !command.ReadsStateFormat(h.StateFormat) {
		return h, 0, fmt.Errorf("%w: state format %d; this node installs format %d", ErrBadBackup, h.StateFormat, command.StateFormat)
	}
	if _, err := fsm.VerifySnapshot(b.Snapshot(), n.cfg.DataDir); err != nil {
		return h, 0, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	timeout := 5 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: h.Index, Term: h.Term, Size: h.Size}
	n.log.Warn("restoring a backup: the cluster's state is replaced", "backup_index", h.Index, "taken_by", h.NodeID, "taken_at", h.CreatedAt)
	if err := n.raft.Restore(meta, b.Snapshot(), timeout); err != nil {
		return h, 0, fmt.Errorf("cluster: restore: %w", err)
	}
	// The state's applied index is the backup's; one entry moves it onto
	// this log, so that reads waiting for the log's index are answered.
	if _, err := n.applyLocal(ctx, &command.Command{Body: &command.Command_Noop{Noop: &command.Noop{}}}); err != nil {
		n.log.Warn("no entry after the restore yet", "err", err)
	}
	n.log.Warn("restored a backup", "backup_index", h.Index, "log_index", n.raft.LastIndex())
	return h, n.raft.LastIndex(), nil
}

// installs refuses a backup of another group than this one, or of a
// cluster of another number of groups: a group's state holds only its
// tenants, so it must land in the group it was taken of. A whole-cluster
// backup of several groups is sent record by record, each to its group's
// leader (`queen-node restore` does).
func (n *Node) installs(b *backup.File) error {
	if len(b.Records) > 1 {
		return fmt.Errorf("the backup holds %d raft groups: restore it with queen-node restore, which sends each group to its leader, "+
			"or send one group's backup with ?group=N", len(b.Records))
	}
	h, groups := b.Header, max(n.cfg.Groups, 1)
	if h.GroupCount() != groups || h.Group != n.cfg.Group {
		return fmt.Errorf("the backup is of raft group %d of %d; this is group %d of %d", h.Group, h.GroupCount(), n.cfg.Group, groups)
	}
	return nil
}
