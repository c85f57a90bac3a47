package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A DeferSync store keeps a small session file beside the data file:
// which boot of the machine wrote to it last, and whether that session
// ended with a clean Close. After a process crash the boot is the same and
// the page cache still holds every write, so the file is whole. After a
// machine crash the boot differs, and unsynced pages may be lost or torn.
type session struct {
	BootID string `json:"bootId"`
	Clean  bool   `json:"clean"`
}

func (db *DB) sessionPath() string { return db.path + ".session" }

func (db *DB) bootID() string {
	if db.opts.BootID != "" {
		return db.opts.BootID
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// previousSessionTrusted decides, from the session record alone, whether
// the existing file (if any) holds every commit of its last session: it
// closed cleanly, or it was last written during this boot of the machine
// (a process crash loses nothing the page cache holds).
func (db *DB) previousSessionTrusted() (bool, error) {
	if _, err := os.Stat(db.path); errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	var prev session
	b, err := os.ReadFile(db.sessionPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil // a file no session vouches for
	case err != nil:
		return false, fmt.Errorf("store: read session: %w", err)
	case json.Unmarshal(b, &prev) != nil:
		return false, nil
	}
	return prev.Clean || prev.BootID == db.bootID(), nil
}

func (db *DB) endSession() error {
	return db.writeSession(session{BootID: db.bootID(), Clean: true})
}

func (db *DB) writeSession(s session) error {
	b, _ := json.Marshal(s)
	tmp := db.sessionPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: write session: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("store: write session: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("store: write session: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: write session: %w", err)
	}
	if err := os.Rename(tmp, db.sessionPath()); err != nil {
		return fmt.Errorf("store: write session: %w", err)
	}
	return syncDir(filepath.Dir(db.path))
}

// Discard moves an untrusted file aside (kept for inspection) so that Open
// starts from nothing.
func Discard(path string) (string, error) {
	aside := path + ".untrusted"
	if err := os.Rename(path, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("store: move untrusted file aside: %w", err)
	}
	return aside, syncDir(filepath.Dir(path))
}
