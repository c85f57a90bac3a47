package msgstore

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// PartitionState is what the state file committed of a partition: its
// records are seqs FirstSeq..NextSeq-1.
type PartitionState struct {
	PID      []byte
	FirstSeq uint64
	NextSeq  uint64
}

// Frozen is a point-in-time extent of the files of the given partitions,
// for a snapshot. The files are append-only, so the extents stay valid
// while writes go on; removals wait until Release.
type Frozen struct {
	s     *Store
	files []frozenFile
	done  bool
}

type frozenFile struct {
	name string // relative to the store's dir
	path string
	size int64
}

// Freeze takes the extents of parts as they are now (flushed: call it
// between batches). It pins the files until Release.
func (s *Store) Freeze(parts []PartitionState) (*Frozen, error) {
	s.mu.Lock()
	s.pins++
	s.mu.Unlock()
	fz := &Frozen{s: s}
	for _, ps := range parts {
		if ps.NextSeq <= ps.FirstSeq {
			continue
		}
		s.mu.Lock()
		p := s.part(ps.PID)
		segs := append([]*segment(nil), p.segs...)
		s.mu.Unlock()
		for i, g := range segs {
			end := ps.NextSeq
			if i+1 < len(segs) {
				end = min(end, segs[i+1].base)
			}
			if g.base >= ps.NextSeq || end <= ps.FirstSeq || end <= g.base {
				continue
			}
			last, err := s.fileEntry(g, end-1)
			if err != nil {
				fz.Release()
				return nil, fmt.Errorf("msgstore: freeze %s seq %d: %w", g.idxPath, end-1, err)
			}
			rel := func(path string) string { r, _ := filepath.Rel(s.dir, path); return filepath.ToSlash(r) }
			fz.files = append(fz.files,
				frozenFile{rel(g.logPath), g.logPath, int64(last.Offset) + int64(last.Length)},
				frozenFile{rel(g.idxPath), g.idxPath, int64(end-g.base) * entrySize})
		}
	}
	return fz, nil
}

// Size is the bytes the frozen extents hold.
func (fz *Frozen) Size() int64 {
	var n int64
	for _, f := range fz.files {
		n += f.size
	}
	return n
}

// WriteTar writes every frozen file to tw, under prefix.
func (fz *Frozen) WriteTar(tw *tar.Writer, prefix string) error {
	for _, f := range fz.files {
		if err := fz.writeOne(tw, prefix, f); err != nil {
			return err
		}
	}
	return nil
}

func (fz *Frozen) writeOne(tw *tar.Writer, prefix string, f frozenFile) error {
	fh, release, err := fz.s.files.get(f.path, false)
	if err != nil {
		return fmt.Errorf("msgstore: snapshot %s: %w", f.name, err)
	}
	defer release()
	if err := tw.WriteHeader(&tar.Header{Name: prefix + f.name, Mode: 0o600, Size: f.size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, io.NewSectionReader(fh, 0, f.size)); err != nil {
		return fmt.Errorf("msgstore: snapshot %s: %w", f.name, err)
	}
	return nil
}

// Release unpins the files; removals that waited for it run now.
func (fz *Frozen) Release() {
	if fz.done {
		return
	}
	fz.done = true
	s := fz.s
	s.mu.Lock()
	s.pins--
	var later []string
	if s.pins == 0 {
		later, s.later = s.later, nil
	}
	s.mu.Unlock()
	s.removeAll(later)
}

// Restorer writes a snapshot's message files beside the store, to replace
// them all at once (Commit).
type Restorer struct {
	s   *Store
	dir string
}

// BeginRestore starts a restore into a fresh directory beside the store.
func (s *Store) BeginRestore() (*Restorer, error) {
	dir := s.dir + ".restore"
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("msgstore: restore: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("msgstore: restore: %w", err)
	}
	return &Restorer{s: s, dir: dir}, nil
}

// Add writes one file of the snapshot (name relative to the store's dir).
func (r *Restorer) Add(name string, rd io.Reader) error {
	clean := filepath.Clean(filepath.FromSlash(name))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return fmt.Errorf("msgstore: restore: bad file name %q", name)
	}
	path := filepath.Join(r.dir, clean)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("msgstore: restore: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("msgstore: restore: %w", err)
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return fmt.Errorf("msgstore: restore %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("msgstore: restore %s: %w", name, err)
	}
	return f.Close()
}

// Commit replaces the store's files with the restored ones. No batch may
// be open.
func (r *Restorer) Commit() error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pins > 0 {
		return errors.New("msgstore: restore while a snapshot pins the files")
	}
	if _, err := migrateLegacy(r.dir); err != nil { // a snapshot of state format 3
		return err
	}
	s.files.closeAll()
	old := s.dir + ".old"
	os.RemoveAll(old)
	if err := os.Rename(s.dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("msgstore: restore: %w", err)
	}
	if err := os.Rename(r.dir, s.dir); err != nil {
		return fmt.Errorf("msgstore: restore: %w", err)
	}
	syncDir(filepath.Dir(s.dir))
	os.RemoveAll(old)
	s.parts = map[string]*partition{}
	s.dirty = map[string]bool{}
	s.later = nil
	return nil
}

// Abort drops a restore that will not be committed.
func (r *Restorer) Abort() { os.RemoveAll(r.dir) }

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// CleanUp removes what an interrupted restore left beside dir. Call it
// before Open.
func CleanUp(dir string) error {
	for _, d := range []string{dir + ".restore", dir + ".old"} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("msgstore: %w", err)
		}
	}
	return nil
}

// RemoveOrphans removes the directories of partitions the state file does
// not know (created by a batch that never committed, or deleted by one
// whose removal a crash interrupted). live reports whether a partition id
// (as named on disk) is in the state.
func (s *Store) RemoveOrphans(live func(dirName string) bool) error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("msgstore: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && !live(e.Name()) {
			if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("msgstore: %w", err)
			}
		}
	}
	return nil
}

// RemoveBelow removes the segment files that hold only seqs below each
// partition's committed FirstSeq: what retention dropped in an entry whose
// file removal a crash interrupted (the state committed, the files were to
// go after). A partition that no append touches again would keep them.
func (s *Store) RemoveBelow(parts []PartitionState) error {
	for _, ps := range parts {
		s.mu.Lock()
		gone := s.part(ps.PID).dropBelow(ps.FirstSeq)
		s.mu.Unlock()
		for _, g := range gone {
			s.files.forget(g.logPath)
			s.files.forget(g.idxPath)
			if err := removeFiles(g.logPath, g.idxPath); err != nil {
				return err
			}
		}
	}
	return nil
}
