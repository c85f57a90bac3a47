package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/queen-node/queen-node/command"
)

// formatFile records, in the data dir, the formats of the state file and of
// the log's commands the data dir holds (command.StateFormat and
// command.LogFormat), so that a binary that reads other formats refuses to
// start, naming both versions, before it opens anything.
const formatFile = "FORMAT"

type dataFormat struct {
	State uint32 `json:"state"`
	Log   uint32 `json:"log"`
	// RaftLog is the store the Raft log is in: "wal" or "bolt" (absent:
	// written before raft-wal, so "bolt").
	RaftLog string `json:"raftLog,omitempty"`
	// RaftGroups is how many Raft groups the data dir holds (groups.go):
	// absent = 1, group 0 alone, in the data dir itself.
	RaftGroups int `json:"raftGroups,omitempty"`
}

// checkDataDir creates the data dir, records the formats in a new one, and
// refuses one of formats this code does not read (a *command.FormatError).
// A data dir that holds state but no FORMAT file was written before formats
// were recorded: format 1.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: data dir: %w", err)
	}
	path := filepath.Join(dir, formatFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if holdsState(dir) {
			return &command.FormatError{What: "data dir " + dir, Found: 1, Supported: command.LogFormat}
		}
		return writeFormat(path)
	case err != nil:
		return fmt.Errorf("cluster: data dir: %w", err)
	}
	var f dataFormat
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("cluster: %s does not parse: %w", path, err)
	}
	if !command.ReadsLogFormat(f.Log) {
		return &command.FormatError{What: "the log in data dir " + dir, Found: f.Log, Supported: command.LogFormat}
	}
	if !command.ReadsStateFormat(f.State) {
		return &command.FormatError{What: "the state file in data dir " + dir, Found: f.State, Supported: command.StateFormat}
	}
	return nil
}

// holdsState reports whether dir has a state file or a Raft log.
func holdsState(dir string) bool {
	for _, name := range []string{"fsm.db", "raft"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

func writeFormat(path string) error {
	return writeFormatAs(path, dataFormat{State: command.StateFormat, Log: command.LogFormat})
}

// recordFormats writes into the FORMAT file the formats the data dir is in
// once it is open (a state of the format before was migrated, and new log
// entries are of this code's format, so an older node refuses it) and the
// store the Raft log is in now (raftlog.Open moved it there if it was in
// the other).
func recordFormats(dir, kind string) error {
	f, err := readFormatRecord(dir)
	if err != nil {
		return err
	}
	now := dataFormat{State: command.StateFormat, Log: command.LogFormat, RaftLog: kind, RaftGroups: f.RaftGroups}
	if f == now {
		return nil
	}
	return writeFormatAs(filepath.Join(dir, formatFile), now)
}

func writeFormatAs(path string, format dataFormat) error {
	b, _ := json.Marshal(format)
	if err := writeSynced(path, append(b, '\n')); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}

// writeSynced replaces path with b durably: a synced temp file renamed
// into place, then the directory synced.
func writeSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

// syncDir makes the renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkRaftGroups refuses a data dir that holds another number of Raft
// groups than n (a data dir with state but no record holds one), naming
// both, and records n in a data dir that holds no state yet. A group's
// log, state and snapshots cannot be split or merged in place: the number
// is fixed when the cluster is first started.
func checkRaftGroups(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: data dir: %w", err)
	}
	f, err := readFormatRecord(dir)
	if err != nil {
		return err
	}
	held := max(f.RaftGroups, 1)
	if held == n {
		return nil
	}
	if holdsState(dir) {
		return fmt.Errorf("cluster: data dir %s holds %d raft groups and this node was started with --raft-groups %d: "+
			"start it with --raft-groups %d (a cluster's number of groups is fixed when it is first started)", dir, held, n, held)
	}
	f.RaftGroups = 0
	if n > 1 {
		f.RaftGroups = n
	}
	return writeFormatAs(filepath.Join(dir, formatFile), f)
}

// heldRaftGroups is the number of Raft groups a data dir holds (1 without
// a record).
func heldRaftGroups(dir string) (int, error) {
	f, err := readFormatRecord(dir)
	return max(f.RaftGroups, 1), err
}

// readFormatRecord reads the data dir's FORMAT, or today's formats when
// there is none.
func readFormatRecord(dir string) (dataFormat, error) {
	path := filepath.Join(dir, formatFile)
	f := dataFormat{State: command.StateFormat, Log: command.LogFormat}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &f); err != nil {
			return f, fmt.Errorf("cluster: %s does not parse: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return f, fmt.Errorf("cluster: data dir: %w", err)
	}
	return f, nil
}
