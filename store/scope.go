package store

import (
	bolt "go.etcd.io/bbolt"
)

// Scope is one tenant's view of the state file: each bucket it lists is
// read and written under a name of the tenant's own (prefix + name), every
// other bucket (the FSM's meta record) is shared. The default tenant has
// no scope (nil), so its records keep the keys they had before tenants.
// Code above the store names buckets as it always did; the scope it is
// handed decides whose records it sees, which is what keeps two tenants'
// queues of the same name apart.
type Scope struct {
	prefix string
	names  map[string]Bucket // a scoped bucket's name → the tenant's name of it
	order  []Bucket          // the tenant's names, in the order given
}

// NewScope is the scope whose buckets are prefix + each of scoped.
func NewScope(prefix string, scoped []Bucket) *Scope {
	s := &Scope{prefix: prefix, names: make(map[string]Bucket, len(scoped))}
	for _, b := range scoped {
		name := Bucket(prefix + string(b))
		s.names[string(b)] = name
		s.order = append(s.order, name)
	}
	return s
}

// Of is the name under which s reads and writes b.
func (s *Scope) Of(b Bucket) Bucket {
	if s == nil {
		return b
	}
	if name, ok := s.names[string(b)]; ok {
		return name
	}
	return b
}

// Buckets are the tenant's own names of its buckets (for a digest).
func (s *Scope) Buckets() []Bucket { return s.order }

// Reader reads r through s.
func (s *Scope) Reader(r Reader) Reader {
	if s == nil {
		return r
	}
	return scopedReader{r: r, s: s}
}

type scopedReader struct {
	r Reader
	s *Scope
}

func (x scopedReader) Get(b Bucket, key []byte) []byte { return x.r.Get(x.s.Of(b), key) }
func (x scopedReader) Cursor(b Bucket) Cursor          { return x.r.Cursor(x.s.Of(b)) }

// In is the batch as s sees it: its Put, Reader and Begin go through s.
func (b *Batch) In(s *Scope) *Batch {
	if s == nil {
		return b
	}
	c := *b
	c.scope = s
	return &c
}

// emptyCursor walks a bucket that does not exist yet (a tenant's, before
// its first write).
type emptyCursor struct{}

func (emptyCursor) First() ([]byte, []byte)      { return nil, nil }
func (emptyCursor) Last() ([]byte, []byte)       { return nil, nil }
func (emptyCursor) Seek([]byte) ([]byte, []byte) { return nil, nil }
func (emptyCursor) Next() ([]byte, []byte)       { return nil, nil }
func (emptyCursor) Prev() ([]byte, []byte)       { return nil, nil }

// writableBucketOf is bucketOf for a write: a tenant's bucket is created
// by its first write.
func writableBucketOf(tx *bolt.Tx, name Bucket) (checkedBucket, error) {
	if b := tx.Bucket(name); b != nil {
		return checkedBucket{b: b, name: name}, nil
	}
	b, err := tx.CreateBucket(name)
	if err != nil {
		return checkedBucket{}, err
	}
	return checkedBucket{b: b, name: name}, nil
}
