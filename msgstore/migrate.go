package msgstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// migrateLegacy rewrites, under dir, every index file of state format 3
// (<seq>.idx, 24-byte entries without checksums) as a checksummed one
// (<seq>.index): each record's CRC-32C is computed from the .log beside it,
// the bytes as they are now, so the migration vouches for nothing older than
// itself. It is idempotent and crash-safe: a new index is written to a
// temporary file, synced and renamed into place before its legacy one goes,
// and a legacy file whose new one exists is only removed. Legacy entries
// whose records the .log does not hold whole (a torn tail a crash left past
// the committed state) are not carried over; trim would cut them anyway.
// It returns how many index files it rewrote.
func migrateLegacy(dir string) (int, error) {
	var legacy []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, legacyIndexExt) {
			legacy = append(legacy, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("msgstore: migrate: %w", err)
	}
	n := 0
	for _, old := range legacy {
		base := strings.TrimSuffix(old, legacyIndexExt)
		if _, err := os.Stat(base + indexExt); err == nil {
			if err := os.Remove(old); err != nil {
				return n, fmt.Errorf("msgstore: migrate: %w", err)
			}
			continue
		}
		if err := migrateIndex(old, base+".log", base+indexExt); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func migrateIndex(oldPath, logPath, newPath string) error {
	idx, err := os.ReadFile(oldPath)
	if err != nil {
		return fmt.Errorf("msgstore: migrate: %w", err)
	}
	records, err := os.ReadFile(logPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("msgstore: migrate: %w", err)
	}
	out := make([]byte, 0, len(idx)/legacyEntrySize*entrySize)
	for k := 0; k+legacyEntrySize <= len(idx); k += legacyEntrySize {
		b := idx[k:]
		e := Entry{
			Offset: binary.BigEndian.Uint32(b[0:]), Length: binary.BigEndian.Uint32(b[4:]),
			CreatedUs: int64(binary.BigEndian.Uint64(b[8:])), TxnHash: binary.BigEndian.Uint64(b[16:]),
		}
		end := int64(e.Offset) + int64(e.Length)
		if end > int64(len(records)) {
			break
		}
		e.CRC = checksum(records[e.Offset:end])
		var eb [entrySize]byte
		e.put(eb[:])
		out = append(out, eb[:]...)
	}
	tmp := newPath + ".tmp"
	if err := writeSynced(tmp, out); err != nil {
		return fmt.Errorf("msgstore: migrate %s: %w", oldPath, err)
	}
	if err := os.Rename(tmp, newPath); err != nil {
		return fmt.Errorf("msgstore: migrate: %w", err)
	}
	syncDir(filepath.Dir(newPath))
	if err := os.Remove(oldPath); err != nil {
		return fmt.Errorf("msgstore: migrate: %w", err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
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
	return err
}
