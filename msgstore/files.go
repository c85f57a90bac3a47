package msgstore

import (
	"container/list"
	"os"
	"sync"
)

// fileCache keeps a bounded number of segment files open. A file in use
// (refs > 0) is never closed; the least recently used idle one is closed
// when the cache is full.
type fileCache struct {
	mu    sync.Mutex
	max   int
	files map[string]*openFile
	lru   *list.List // of *openFile, most recent at the front
}

type openFile struct {
	path string
	f    *os.File
	refs int
	elem *list.Element
	gone bool // removed from the cache while in use: close on last release
}

func newFileCache(max int) *fileCache {
	return &fileCache{max: max, files: map[string]*openFile{}, lru: list.New()}
}

// get opens path (creating it when create) and returns it with its release.
func (c *fileCache) get(path string, create bool) (*os.File, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	of, ok := c.files[path]
	if !ok {
		flags := os.O_RDWR
		if create {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(path, flags, 0o600)
		if err != nil {
			return nil, nil, err
		}
		of = &openFile{path: path, f: f}
		of.elem = c.lru.PushFront(of)
		c.files[path] = of
		c.evict()
	} else {
		c.lru.MoveToFront(of.elem)
	}
	of.refs++
	return of.f, func() { c.release(of) }, nil
}

func (c *fileCache) release(of *openFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	of.refs--
	if of.refs == 0 && of.gone {
		of.f.Close()
	}
}

// evict closes idle files past the limit.
func (c *fileCache) evict() {
	for e := c.lru.Back(); e != nil && len(c.files) > c.max; {
		of := e.Value.(*openFile)
		prev := e.Prev()
		if of.refs == 0 {
			c.lru.Remove(e)
			delete(c.files, of.path)
			of.f.Close()
		}
		e = prev
	}
}

// forget drops path from the cache (before it is removed or replaced); a
// reader still using it keeps its handle until it releases it.
func (c *fileCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if of, ok := c.files[path]; ok {
		c.lru.Remove(of.elem)
		delete(c.files, path)
		if of.refs == 0 {
			of.f.Close()
		} else {
			of.gone = true
		}
	}
}

// closeAll closes every idle file and forgets the rest.
func (c *fileCache) closeAll() {
	c.mu.Lock()
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	c.mu.Unlock()
	for _, p := range paths {
		c.forget(p)
	}
}
