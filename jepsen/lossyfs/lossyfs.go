// Package lossyfs is a FUSE loopback filesystem that can lose power: file
// data written through it stays in the daemon's memory, per file, until that
// file is fsynced (fsync or fdatasync, on any descriptor of the file, or a
// write through a descriptor opened with O_SYNC/O_DSYNC), and PowerLoss
// throws every unsynced byte away and unmounts. It stands in for a machine's
// page cache and disk in the fault tests: a SIGKILL of a process loses
// nothing (the "page cache", the daemon, survives it), a power loss loses
// exactly what the program did not fsync.
//
// What it models:
//
//   - Reads, including mmap page faults, see the unsynced writes, and a
//     file's size includes them (read-your-writes, as a page cache gives).
//   - fsync/fdatasync of a file writes its unsynced pages to the backing
//     directory, which plays the disk: what reached it survives a power
//     loss. (The backing directory is not fsynced itself: the simulation
//     only ever loses what is in the daemon's memory.)
//   - After a power loss a file holds exactly the data of its last fsync
//     (PowerLoss), or, in torn mode (PowerLossTorn), its synced data plus a
//     random subset of its unsynced 4 KiB pages: a disk that wrote some
//     of the dirty pages back before the power went, in no particular
//     order.
//
// What it simplifies (a real filesystem can be worse):
//
//   - Metadata operations (create, mkdir, rename, unlink, link, truncate,
//     chmod, utimes) are applied to the backing directory at once and are
//     never lost. A real filesystem may lose a create or a rename that was
//     not followed by an fsync of its directory, or persist a rename before
//     the data of the renamed file. Directory fsyncs are accepted and do
//     nothing.
//   - A file's size after a power loss is its size at the last fsync or
//     truncate; a filesystem that journals a size change before the data
//     (or a torn page inside a 4 KiB page, at sector granularity) is not
//     modelled.
//   - A page written twice since the last fsync survives a torn power loss
//     in its latest version or not at all, never in an intermediate one.
//   - fallocate is refused (EOPNOTSUPP), O_DIRECT is served as buffered
//     I/O (durable only after an fsync, which is what POSIX promises), and
//     fsync is nearly free (a copy into the backing directory), so nothing
//     here explores what a slow disk does to timing.
//
// The kernel's own FUSE page cache is write-through here (no writeback
// cache): every write() reaches the daemon before it returns, so the
// daemon's memory is the only place unsynced data lives, and dropping it is
// a power loss.
//
// Mounting needs root and /dev/fuse; it uses go-fuse's direct mount (no
// fusermount binary is needed), on a shared bind mount of the mountpoint
// (see Mount). Available says whether this machine can.
//
// A Go process must never fault on an mmap of a file on a mount it serves
// itself (a thread stuck in the page fault blocks the garbage collector,
// which blocks the server): the programs under test run in processes of
// their own.
package lossyfs

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// PageSize is the granularity of unsynced data (and of torn power losses).
const PageSize = 4096

// FS is one mounted lossy filesystem.
type FS struct {
	backing    string
	mountpoint string
	server     *fuse.Server

	mu      sync.Mutex
	files   map[uint64]*fileState // by backing inode number, live files only
	all     map[*fileState]bool   // every state with an open fd (for cleanup)
	dead    bool                  // powered off or unmounted: every data op fails
	closed  bool
	stopped bool // the server has stopped serving (the connection ended)

	fsyncDelay atomic.Int64 // ns every fsync waits first (a slow disk)
	full       atomic.Bool  // every data write fails with ENOSPC, statfs says no space
}

// SetFsyncDelay makes every fsync, fdatasync and synchronous write wait d
// before it makes anything durable, as a slow or overloaded disk would (0:
// none). Nothing is lost by it.
func (f *FS) SetFsyncDelay(d time.Duration) { f.fsyncDelay.Store(int64(d)) }

// SetFull makes the disk full (every data write fails with ENOSPC and
// statfs reports no free blocks) or frees it again.
func (f *FS) SetFull(full bool) { f.full.Store(full) }

// slowSync waits the fsync delay.
func (f *FS) slowSync() {
	if d := f.fsyncDelay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}

// Options configure Mount.
type Options struct {
	// Debug logs every FUSE request (very verbose).
	Debug bool
}

// Mount serves backing (an existing directory, on one filesystem) at
// mountpoint (an existing directory).
func Mount(backing, mountpoint string, opts *Options) (*FS, error) {
	if opts == nil {
		opts = &Options{}
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	mountpoint, err = filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	rootOps, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	f := &FS{backing: backing, mountpoint: mountpoint, files: map[uint64]*fileState{}, all: map[*fileState]bool{}}
	lb := rootOps.(*fs.LoopbackNode)
	root := &node{LoopbackNode: lb, fs: f}
	lb.RootData.RootNode = root
	// The FUSE mount goes on a shared bind mount of the mountpoint onto
	// itself. A process started with `ip netns exec` gets a copy of the
	// whole mount table (this mount included) in a namespace of its own;
	// whether an unmount here reaches those copies depends on the parent
	// mount's propagation, and a shared parent propagates it. Without that
	// every other node's namespace would keep this connection (and the
	// dead disk's state) alive after a power loss.
	if err := syscall.Mount(mountpoint, mountpoint, "", syscall.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("lossyfs: bind %s: %w", mountpoint, err)
	}
	if err := syscall.Mount("", mountpoint, "", syscall.MS_SHARED, ""); err != nil {
		syscall.Unmount(mountpoint, syscall.MNT_DETACH)
		return nil, fmt.Errorf("lossyfs: make %s shared: %w", mountpoint, err)
	}
	sec := time.Second
	server, err := fs.Mount(mountpoint, root, &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // no fusermount here: mount(2) as root
			AllowOther:        true,
			FsName:            "lossyfs:" + backing,
			Name:              "lossyfs",
			DisableXAttrs:     true,
			Debug:             opts.Debug,
		},
	})
	if err != nil {
		syscall.Unmount(mountpoint, syscall.MNT_DETACH)
		return nil, fmt.Errorf("lossyfs: mount %s on %s: %w", backing, mountpoint, err)
	}
	f.server = server
	live.Lock()
	live.m[f] = true
	live.Unlock()
	return f, nil
}

// live is every mounted FS of this process, for DetachAll.
var live = struct {
	sync.Mutex
	m map[*FS]bool
}{m: map[*FS]bool{}}

// DetachAll lazily detaches every lossyfs this process mounted, without
// writing anything back (as a power loss would), for a process that is
// about to exit on a signal: a FUSE mount whose server is gone stays behind
// as a dead mount ("transport endpoint is not connected") otherwise.
func DetachAll() {
	live.Lock()
	defer live.Unlock()
	for f := range live.m {
		f.mu.Lock()
		f.dead = true
		f.closed = true
		f.mu.Unlock()
		syscall.Unmount(f.mountpoint, syscall.MNT_DETACH) // the FUSE mount
		syscall.Unmount(f.mountpoint, syscall.MNT_DETACH) // the bind under it
	}
	live.m = map[*FS]bool{}
}

// Stopped reports whether the server has stopped after an unmount or a
// power loss, that is whether no copy of the mount anywhere kept the
// connection open.
func (f *FS) Stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// Backing is the directory that plays the disk.
func (f *FS) Backing() string { return f.backing }

// Mountpoint is where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Loss says what a power loss threw away.
type Loss struct {
	Files int   // files that had unsynced data
	Pages int   // unsynced pages dropped
	Kept  int   // unsynced pages written back anyway (torn mode)
	Bytes int64 // bytes dropped
	// PerFile counts dropped pages by path (relative to the mount, as the
	// file was named when it was opened).
	PerFile map[string]int
}

func (l Loss) String() string {
	if l.Files == 0 {
		return "no unsynced data"
	}
	names := make([]string, 0, len(l.PerFile))
	for n := range l.PerFile {
		names = append(names, n)
	}
	sort.Strings(names)
	s := fmt.Sprintf("dropped %d unsynced pages (%d bytes) in %d files", l.Pages, l.Bytes, l.Files)
	if l.Kept > 0 {
		s += fmt.Sprintf(", kept %d torn", l.Kept)
	}
	s += ":"
	for i, n := range names {
		if i == 4 {
			s += " ..."
			break
		}
		s += fmt.Sprintf(" %s=%d", n, l.PerFile[n])
	}
	return s
}

// PowerLoss drops every unsynced write and unmounts. Processes using the
// filesystem must have been killed first (a mount in use cannot be
// unmounted); any request still arriving fails with EIO.
func (f *FS) PowerLoss() (Loss, error) { return f.powerLoss(nil, 0) }

// PowerLossTorn is PowerLoss where each unsynced page independently reaches
// the disk with probability keep before the power goes.
func (f *FS) PowerLossTorn(rng *rand.Rand, keep float64) (Loss, error) {
	return f.powerLoss(rng, keep)
}

func (f *FS) powerLoss(rng *rand.Rand, keep float64) (Loss, error) {
	loss := Loss{PerFile: map[string]int{}}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return loss, errors.New("lossyfs: already unmounted")
	}
	f.dead = true
	states := f.states()
	f.files = map[uint64]*fileState{}
	f.mu.Unlock()
	for _, st := range states {
		st.mu.Lock()
		if len(st.pages) > 0 {
			loss.Files++
		}
		for _, idx := range st.sortedPages() {
			if rng != nil && rng.Float64() < keep {
				if st.writePage(idx) == nil {
					loss.Kept++
					continue
				}
			}
			loss.Pages++
			loss.Bytes += PageSize
			loss.PerFile[st.name]++
		}
		st.pages = nil
		st.mu.Unlock()
	}
	return loss, f.unmount()
}

// Unmount is a clean shutdown: every unsynced write is written back (as an
// operating system does at shutdown), then the filesystem is unmounted.
func (f *FS) Unmount() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	states := f.states()
	f.mu.Unlock()
	var first error
	for _, st := range states {
		st.mu.Lock()
		if err := st.flush(); err != nil && first == nil {
			first = err
		}
		st.mu.Unlock()
	}
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
	if err := f.unmount(); err != nil && first == nil {
		first = err
	}
	return first
}

// Sync writes back every unsynced write of every file (like sync(1)).
func (f *FS) Sync() error {
	f.mu.Lock()
	states := f.states()
	f.mu.Unlock()
	var first error
	for _, st := range states {
		st.mu.Lock()
		if err := st.flush(); err != nil && first == nil {
			first = err
		}
		st.mu.Unlock()
	}
	return first
}

// Unsynced counts the pages not yet fsynced, over all files.
func (f *FS) Unsynced() int {
	f.mu.Lock()
	states := f.states()
	f.mu.Unlock()
	n := 0
	for _, st := range states {
		st.mu.Lock()
		n += len(st.pages)
		st.mu.Unlock()
	}
	return n
}

func (f *FS) states() []*fileState {
	out := make([]*fileState, 0, len(f.all))
	for st := range f.all {
		out = append(out, st)
	}
	return out
}

// unmount unmounts and waits a little for the server to stop, then closes
// every backing descriptor.
//
// The FUSE mount sits on a shared bind mount (see Mount), so unmounting it
// here also removes the copies that other mount namespaces made of it
// (`ip netns exec` gives each process a copy of the whole mount table, as
// slaves). If a copy survives
// anyway, the connection lives on with it; the server then answers EIO to
// whatever arrives (the filesystem is dead), and the mountpoint here is
// free all the same.
func (f *FS) unmount() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	live.Lock()
	delete(live.m, f)
	live.Unlock()
	err := umount(f.mountpoint) // the FUSE mount
	if berr := umount(f.mountpoint); berr != nil && err == nil {
		err = fmt.Errorf("the bind mount under it: %w", berr)
	}
	stopped := make(chan struct{})
	go func() { f.server.Wait(); close(stopped) }()
	select {
	case <-stopped:
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
	case <-time.After(5 * time.Second):
		// A copy of the mount in another namespace keeps the connection.
	}
	f.mu.Lock()
	for st := range f.all {
		st.closeFd()
	}
	f.all = map[*fileState]bool{}
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lossyfs: unmount %s: %w", f.mountpoint, err)
	}
	return nil
}

// umount unmounts dir, retrying while it is busy for a little (the kernel
// may not have released a killed process's files yet), and detaching it
// after that (so the mountpoint is free; the mount ends with its last user).
func umount(dir string) error {
	var err error
	for delay := 5 * time.Millisecond; ; delay *= 2 {
		err = syscall.Unmount(dir, 0)
		if err != syscall.EBUSY || delay > 2*time.Second {
			break
		}
		time.Sleep(delay)
	}
	if err == syscall.EBUSY {
		if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("%w; detach: %v", err, derr)
		}
		return fmt.Errorf("%w: detached it", err)
	}
	return err
}

// state finds or makes the state of the backing file open on fd (which it
// takes over, or closes when the file already has a state).
func (f *FS) state(fd int, name string, writable bool) (*fileState, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fs.ToErrno(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		unix.Close(fd)
		return nil, syscall.EIO
	}
	if s, ok := f.files[st.Ino]; ok {
		s.mu.Lock()
		if writable && !s.writable {
			// Upgrade the state's descriptor to one that can write back.
			unix.Close(s.fd)
			s.fd, s.writable = fd, true
		} else {
			unix.Close(fd)
		}
		s.handles++
		s.name = name
		s.mu.Unlock()
		return s, 0
	}
	s := &fileState{fs: f, ino: st.Ino, name: name, fd: fd, writable: writable, size: st.Size, handles: 1}
	f.files[st.Ino] = s
	f.all[s] = true
	return s, 0
}

// lookupIno is the live state of backing inode ino, if any.
func (f *FS) lookupIno(ino uint64) *fileState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[ino]
}

// unlinked drops the state of ino if the backing file has no name left.
// Open handles keep their state (and its data) until they close.
func (f *FS) unlinked(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.files[ino]
	if !ok {
		return
	}
	var st unix.Stat_t
	s.mu.Lock()
	defer s.mu.Unlock()
	if unix.Fstat(s.fd, &st) == nil && st.Nlink > 0 {
		return
	}
	delete(f.files, ino)
	s.gone = true
	if s.handles == 0 {
		s.pages = nil
		s.closeFdLocked()
		delete(f.all, s)
	}
}

// release ends one handle of s.
func (f *FS) release(s *fileState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handles--
	if s.handles > 0 {
		return
	}
	if len(s.pages) > 0 && !s.gone && !f.dead {
		// Unsynced data outlives the descriptors (a page cache does): a
		// later open finds it, an fsync or a clean unmount writes it
		// back, a power loss drops it.
		return
	}
	if cur, ok := f.files[s.ino]; ok && cur == s {
		delete(f.files, s.ino)
	}
	s.pages = nil
	s.closeFdLocked()
	delete(f.all, s)
}

func (f *FS) isDead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}
