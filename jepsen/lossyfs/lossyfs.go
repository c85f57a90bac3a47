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
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
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

// fileState is the unsynced data of one file, shared by all its handles.
type fileState struct {
	fs       *FS
	ino      uint64
	mu       sync.Mutex
	name     string
	fd       int // the backing file, for reads and write-back
	writable bool
	size     int64            // the size the file has with its unsynced writes
	pages    map[int64][]byte // unsynced pages by index, PageSize bytes each
	handles  int
	gone     bool // unlinked
}

func (s *fileState) closeFd() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeFdLocked()
}

func (s *fileState) closeFdLocked() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

func (s *fileState) sortedPages() []int64 {
	idx := make([]int64, 0, len(s.pages))
	for i := range s.pages {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	return idx
}

// preadFull reads len(buf) bytes at off from the backing file; what lies
// past its end reads as zeros.
func (s *fileState) preadFull(buf []byte, off int64) error {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(s.fd, buf[n:], off+int64(n))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			break
		}
		n += m
	}
	clear(buf[n:])
	return nil
}

// read fills buf from off with the file's current contents; it returns how
// many bytes lie before the end of the file.
func (s *fileState) read(buf []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, nil
	}
	if end := off + int64(len(buf)); end > s.size {
		buf = buf[:s.size-off]
	}
	if err := s.preadFull(buf, off); err != nil {
		return 0, err
	}
	if len(s.pages) == 0 {
		return len(buf), nil
	}
	end := off + int64(len(buf))
	for p := off / PageSize; p*PageSize < end; p++ {
		page, ok := s.pages[p]
		if !ok {
			continue
		}
		ps := p * PageSize
		lo, hi := max(ps, off), min(ps+PageSize, end)
		copy(buf[lo-off:hi-off], page[lo-ps:hi-ps])
	}
	return len(buf), nil
}

// write puts data at off into the unsynced pages.
func (s *fileState) write(data []byte, off int64) error {
	if s.pages == nil {
		s.pages = map[int64][]byte{}
	}
	end := off + int64(len(data))
	for p := off / PageSize; p*PageSize < end; p++ {
		ps := p * PageSize
		lo, hi := max(ps, off), min(ps+PageSize, end)
		page, ok := s.pages[p]
		if !ok {
			page = make([]byte, PageSize)
			if lo > ps || hi < ps+PageSize {
				// A partial page: start from what the file holds there.
				if _, err := s.read(page, ps); err != nil {
					return err
				}
			}
			s.pages[p] = page
		}
		copy(page[lo-ps:hi-ps], data[lo-off:hi-off])
	}
	if end > s.size {
		s.size = end
	}
	return nil
}

// truncate is applied to the backing file at once (metadata is not lost);
// unsynced data past the new size goes.
func (s *fileState) truncate(size int64) error {
	if !s.writable {
		return syscall.EBADF
	}
	if err := unix.Ftruncate(s.fd, size); err != nil {
		return err
	}
	for p, page := range s.pages {
		ps := p * PageSize
		switch {
		case ps >= size:
			delete(s.pages, p)
		case ps+PageSize > size:
			clear(page[size-ps:])
		}
	}
	s.size = size
	return nil
}

// writePage writes unsynced page idx to the backing file (clipped to the
// file's size).
func (s *fileState) writePage(idx int64) error {
	if !s.writable {
		return syscall.EBADF
	}
	ps := idx * PageSize
	n := min(int64(PageSize), s.size-ps)
	if n <= 0 {
		return nil
	}
	buf := s.pages[idx][:n]
	for len(buf) > 0 {
		m, err := unix.Pwrite(s.fd, buf, ps)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		buf, ps = buf[m:], ps+int64(m)
	}
	return nil
}

// flush is fsync: every unsynced page reaches the backing file, whose size
// becomes the file's size.
func (s *fileState) flush() error {
	if len(s.pages) == 0 {
		return nil
	}
	for _, idx := range s.sortedPages() {
		if err := s.writePage(idx); err != nil {
			return err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return err
	}
	if st.Size < s.size {
		if err := unix.Ftruncate(s.fd, s.size); err != nil {
			return err
		}
	}
	s.pages = nil
	return nil
}

// patch makes attributes read from the backing file show the unsynced size.
func (s *fileState) patch(a *fuse.Attr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.Size = uint64(s.size)
	if b := (uint64(s.size) + 511) / 512; b > a.Blocks {
		a.Blocks = b
	}
}

// node is a loopback node whose files go through the lossy path.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeStatxer     = (*node)(nil)
	_ fs.NodeTmpfiler    = (*node)(nil)
)

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

// rel is the node's path relative to the mount; abs its backing path.
func (n *node) rel() string { return n.Path(nil) }
func (n *node) abs() string { return filepath.Join(n.RootData.Path, n.rel()) }

// openFlags turns the kernel's open flags into the flags the backing file
// is opened with: always read-write (the state writes back through it and
// reads pages to complete partial writes), without the flags the daemon
// implements itself.
func openFlags(flags uint32) (backing int, syncWrites, trunc bool) {
	f := int(flags)
	syncWrites = f&(syscall.O_SYNC|syscall.O_DSYNC) != 0
	trunc = f&syscall.O_TRUNC != 0
	f &^= syscall.O_ACCMODE | syscall.O_APPEND | syscall.O_TRUNC | syscall.O_CREAT | syscall.O_EXCL |
		syscall.O_DIRECT | syscall.O_SYNC | syscall.O_DSYNC | syscall.O_NOCTTY | fuse.FMODE_EXEC
	return f | syscall.O_RDWR | syscall.O_CLOEXEC, syncWrites, trunc
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.isDead() {
		return nil, 0, syscall.EIO
	}
	bflags, syncWrites, trunc := openFlags(flags)
	p := n.abs()
	writable := true
	fd, err := unix.Open(p, bflags|unix.O_NOFOLLOW, 0)
	if err != nil && flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		// A file the daemon cannot write (a running executable, say):
		// reading it is all the caller asked for.
		bflags = bflags&^syscall.O_RDWR | syscall.O_RDONLY
		fd, err = unix.Open(p, bflags|unix.O_NOFOLLOW, 0)
		writable = false
	}
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	st, errno := n.fs.state(fd, n.rel(), writable)
	if errno != 0 {
		return nil, 0, errno
	}
	h := &handle{st: st, syncWrites: syncWrites}
	if trunc {
		st.mu.Lock()
		err := st.truncate(0)
		st.mu.Unlock()
		if err != nil {
			h.Release(ctx)
			return nil, 0, fs.ToErrno(err)
		}
	}
	return h, 0, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.isDead() {
		return nil, nil, 0, syscall.EIO
	}
	// The loopback creates the file and its inode; the daemon then opens
	// it its own way.
	ch, lf, _, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if r, ok := lf.(fs.FileReleaser); ok {
		r.Release(ctx)
	}
	bflags, syncWrites, trunc := openFlags(flags)
	rel := filepath.Join(n.rel(), name)
	fd, err := unix.Open(filepath.Join(n.RootData.Path, rel), bflags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	st, errno := n.fs.state(fd, rel, true)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h := &handle{st: st, syncWrites: syncWrites}
	st.mu.Lock()
	if trunc {
		if err := st.truncate(0); err != nil {
			st.mu.Unlock()
			h.Release(ctx)
			return nil, nil, 0, fs.ToErrno(err)
		}
	}
	st.mu.Unlock()
	st.patch(&out.Attr)
	return ch, h, 0, 0
}

func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		if st := n.fs.lookupIno(out.Attr.Ino); st != nil {
			st.patch(&out.Attr)
		}
	}
	return ch, errno
}

// Statx is left to GETATTR (the kernel falls back when it gets ENOSYS), so
// that sizes come from one place.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	if st := n.fs.lookupIno(out.Attr.Ino); st != nil {
		st.patch(&out.Attr)
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	h, _ := f.(*handle)
	if size, ok := in.GetSize(); ok {
		if n.fs.isDead() {
			return syscall.EIO
		}
		st := (*fileState)(nil)
		if h != nil {
			st = h.st
		} else {
			var s unix.Stat_t
			if err := unix.Lstat(n.abs(), &s); err != nil {
				return fs.ToErrno(err)
			}
			st = n.fs.lookupIno(s.Ino)
		}
		if st != nil {
			st.mu.Lock()
			err := st.truncate(int64(size))
			st.mu.Unlock()
			if err != nil {
				return fs.ToErrno(err)
			}
		} else if err := unix.Truncate(n.abs(), int64(size)); err != nil {
			return fs.ToErrno(err)
		}
	}
	rest := *in
	rest.Valid &^= fuse.FATTR_SIZE
	if rest.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER|fuse.FATTR_CTIME|fuse.FATTR_KILL_SUIDGID) != 0 {
		if errno := n.LoopbackNode.Setattr(ctx, nil, &rest, out); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, f, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	var s unix.Stat_t
	haveIno := unix.Lstat(filepath.Join(n.abs(), name), &s) == nil
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		return errno
	}
	if haveIno {
		n.fs.unlinked(s.Ino)
	}
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var s unix.Stat_t
	target := ""
	if np, ok := newParent.(*node); ok {
		target = filepath.Join(np.abs(), newName)
	}
	haveIno := target != "" && unix.Lstat(target, &s) == nil
	if errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); errno != 0 {
		return errno
	}
	if haveIno {
		n.fs.unlinked(s.Ino) // a no-op when the target still has a name (an exchange)
	}
	return 0
}

// handle is an open file.
type handle struct {
	st         *fileState
	syncWrites bool
	once       sync.Once
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.st.fs.isDead() {
		return nil, syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	n, err := h.st.read(buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.st.fs.isDead() {
		return 0, syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if !h.st.writable {
		return 0, syscall.EBADF
	}
	if err := h.st.write(data, off); err != nil {
		return 0, fs.ToErrno(err)
	}
	if h.syncWrites {
		if err := h.st.flush(); err != nil {
			return 0, fs.ToErrno(err)
		}
	}
	return uint32(len(data)), 0
}

// Fsync (and fdatasync) make the whole file durable, whichever descriptor
// asks.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.st.fs.isDead() {
		return syscall.EIO
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return fs.ToErrno(h.st.flush())
}

// Flush is close(2): it makes nothing durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.once.Do(func() { h.st.fs.release(h.st) })
	return 0
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	h.st.mu.Lock()
	fd := h.st.fd
	var s syscall.Stat_t
	err := syscall.Fstat(fd, &s)
	h.st.mu.Unlock()
	if err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&s)
	h.st.patch(&out.Attr)
	return 0
}

var (
	availOnce sync.Once
	availOK   bool
	availWhy  string
)

// Available reports whether lossyfs can be mounted here (root, /dev/fuse,
// and a probe mount that works), and if not why.
func Available() (bool, string) {
	availOnce.Do(func() { availOK, availWhy = probe() })
	return availOK, availWhy
}

func probe() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root (mounting without fusermount needs root)"
	}
	fd, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return false, "/dev/fuse: " + err.Error()
	}
	fd.Close()
	dir, err := os.MkdirTemp("", "lossyfs-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	b, m := filepath.Join(dir, "b"), filepath.Join(dir, "m")
	os.Mkdir(b, 0o755)
	os.Mkdir(m, 0o755)
	f, err := Mount(b, m, nil)
	if err != nil {
		return false, err.Error()
	}
	if err := os.WriteFile(filepath.Join(m, "probe"), []byte("x"), 0o644); err != nil {
		f.Unmount()
		return false, "write through a probe mount: " + err.Error()
	}
	if err := f.Unmount(); err != nil {
		return false, err.Error()
	}
	return true, ""
}
