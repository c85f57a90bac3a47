package lossyfs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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
	_ fs.NodeStatfser    = (*node)(nil)
)

// Statfs is the backing filesystem's, with no free blocks while the disk
// is full (SetFull).
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if errno := n.LoopbackNode.Statfs(ctx, out); errno != 0 {
		return errno
	}
	if n.fs.full.Load() {
		out.Bfree, out.Bavail = 0, 0
	}
	return 0
}

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
	if h.st.fs.full.Load() {
		return 0, syscall.ENOSPC
	}
	if h.syncWrites {
		h.st.fs.slowSync()
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
	h.st.fs.slowSync()
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
