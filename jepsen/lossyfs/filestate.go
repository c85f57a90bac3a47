package lossyfs

import (
	"sort"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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
