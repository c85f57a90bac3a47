package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/internal/testfiles"
)

// untar unpacks testdata/name into a new dir and returns the data dir in it.
func untar(t *testing.T, name string) string {
	return testfiles.UntarData(t, filepath.Join("testdata", name))
}

func startOn(t *testing.T, dir string) (*Node, error) {
	n, err := Start(Config{NodeID: "n1", DataDir: dir, RaftAddr: freeAddr(t), BootstrapExpect: 1, Tuning: fastTuning()})
	if err == nil {
		t.Cleanup(func() { n.Shutdown() })
	}
	return n, err
}

// A data dir the commit before formats wrote (format 1) is refused before
// anything is opened, with a message that names both formats and what to do.
func TestOldFormatDataDirIsRefused(t *testing.T) {
	dir := untar(t, "datadir-format1.tgz")
	before, err := os.ReadFile(filepath.Join(dir, "fsm.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = startOn(t, dir)
	var fe *command.FormatError
	if !errors.As(err, &fe) || fe.Found != 1 || fe.Supported != command.LogFormat {
		t.Fatalf("start on a format-1 data dir: %v", err)
	}
	for _, want := range []string{"format 1", fmt.Sprintf("format %d", command.LogFormat), "empty data dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, "fsm.db"))
	if string(before) != string(after) {
		t.Fatal("the refused state file was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, formatFile)); err == nil {
		t.Fatal("a FORMAT file was written into a refused data dir")
	}
}

// Past the FORMAT file, the state file's own record of its format is
// checked: a format-1 state file is refused even when FORMAT claims the
// current format.
func TestOldFormatStateFileIsRefused(t *testing.T) {
	dir := untar(t, "datadir-format1.tgz")
	if err := writeFormat(filepath.Join(dir, formatFile)); err != nil {
		t.Fatal(err)
	}
	_, err := startOn(t, dir)
	var fe *command.FormatError
	if !errors.As(err, &fe) || fe.Found != 1 || !strings.Contains(fe.What, "state file") {
		t.Fatalf("start on a format-1 state file: %v", err)
	}
}

// A new data dir records the formats; a later format (a newer binary's) is
// refused too; the current one starts.
func TestFormatFile(t *testing.T) {
	dir := t.TempDir()
	n, err := startOn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	b, err := os.ReadFile(filepath.Join(dir, formatFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"state":%d,"log":%d,"raftLog":"wal"}`, command.StateFormat, command.LogFormat); strings.TrimSpace(string(b)) != want {
		t.Fatalf("FORMAT = %s, want %s", b, want)
	}
	if _, err := startOn(t, dir); err != nil {
		t.Fatalf("restart on the current format: %v", err)
	}
	newer := t.TempDir()
	os.WriteFile(filepath.Join(newer, formatFile), []byte(fmt.Sprintf(`{"state":%d,"log":%d}`, command.StateFormat, command.LogFormat+1)), 0o644)
	var fe *command.FormatError
	if _, err := startOn(t, newer); !errors.As(err, &fe) || fe.Found != command.LogFormat+1 {
		t.Fatalf("a newer log format: %v", err)
	}
	os.WriteFile(filepath.Join(newer, formatFile), []byte("not json"), 0o644)
	if _, err := startOn(t, newer); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("a FORMAT that does not parse: %v", err)
	}
}
