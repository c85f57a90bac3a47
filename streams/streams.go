package streams

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"slices"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Buckets owned by streams.
var (
	bQueries   = store.Bucket("streams_queries")   // name → StreamQueryRecord
	bQueryIDs  = store.Bucket("streams_query_ids") // query id → name
	bState     = store.Bucket("streams_state")     // stateId pid key → StreamStateRow
	bKeys      = store.Bucket("streams_keys")      // stateId pid → uint64 rows held
	bGraveyard = store.Bucket("streams_graveyard") // stateId → nil: a generation whose rows go
)

// Buckets lists every bucket of the package, for the state file.
var Buckets = []store.Bucket{bQueries, bQueryIDs, bState, bKeys, bGraveyard}

// Limits (spec §4.16 leaves them to the broker); flags may raise the ones
// the front ends check (request.StreamLimits).
const (
	DefaultMaxOps        = 1000
	DefaultMaxPushes     = 1000
	DefaultMaxValueBytes = 64 << 10
	DefaultMaxKeys       = 100_000
	MaxKeyBytes          = 1024
)

// Tx is the staged transaction of a command.
type Tx interface {
	store.Reader
	Put(b store.Bucket, key, value []byte)
	Delete(b store.Bucket, key []byte)
}

// QueryByName is the query registered under name, or nil.
func QueryByName(r store.Reader, name string) *command.StreamQueryRecord {
	v := r.Get(bQueries, []byte(name))
	if v == nil {
		return nil
	}
	q := &command.StreamQueryRecord{}
	command.MustDecodeRecord(v, q)
	return q
}

// Query is the query of id, or nil.
func Query(r store.Reader, id []byte) *command.StreamQueryRecord {
	name := r.Get(bQueryIDs, id)
	if name == nil {
		return nil
	}
	return QueryByName(r, string(name))
}

// Queries lists every query, by name.
func Queries(r store.Reader) []*command.StreamQueryRecord {
	var out []*command.StreamQueryRecord
	c := r.Cursor(bQueries)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		q := &command.StreamQueryRecord{}
		command.MustDecodeRecord(v, q)
		out = append(out, q)
	}
	return out
}

// Register registers a query by name (idempotent): a new name takes the
// command's minted ids (fresh); the same hash keeps the query and its state
// and takes the queues given; another hash with reset starts a new state
// generation (the old rows are swept) and answers reset; another hash
// without reset changes nothing and answers mismatch (409). As Queen's
// server does, reset with an unchanged hash keeps the state.
func Register(tx Tx, in *command.StreamRegister, now int64) *command.StreamRegisterResult {
	q := QueryByName(tx, in.Name)
	res := &command.StreamRegisterResult{}
	switch {
	case q == nil:
		q = &command.StreamQueryRecord{Id: in.QueryId, Name: in.Name, StateId: in.StateId, CreatedUs: now}
		res.Fresh = true
		tx.Put(bQueryIDs, bytes.Clone(q.Id), []byte(q.Name))
	case q.ConfigHash == in.ConfigHash:
	case !in.ResetState:
		res.Query, res.Mismatch = q, true
		return res
	default:
		bury(tx, q.StateId)
		q.StateId = in.StateId
		res.DidReset = true
	}
	q.SourceQueue, q.SinkQueue, q.ConfigHash, q.UpdatedUs = in.SourceQueue, in.SinkQueue, in.ConfigHash, now
	tx.Put(bQueries, []byte(q.Name), command.MustEncodeRecord(q))
	res.Query = q
	return res
}

// Delete removes the query of name; its rows are swept. It reports whether
// there was one.
func Delete(tx Tx, name string) bool {
	q := QueryByName(tx, name)
	if q == nil {
		return false
	}
	tx.Delete(bQueries, []byte(name))
	tx.Delete(bQueryIDs, q.Id)
	bury(tx, q.StateId)
	return true
}

// bury hands a state generation to the sweep.
func bury(tx Tx, stateID []byte) { tx.Put(bGraveyard, bytes.Clone(stateID), nil) }

func rowsKey(stateID, pid []byte) []byte {
	k := make([]byte, 0, len(stateID)+len(pid))
	return append(append(k, stateID...), pid...)
}

func rowKey(stateID, pid []byte, key string) []byte {
	return append(rowsKey(stateID, pid), key...)
}

// State is one query's rows in one partition, within a command.
type State struct {
	tx      Tx
	prefix  []byte // stateId pid
	held    uint64 // rows held
	changed bool
	maxKeys uint64
}

// Open is q's state in partition pid, within tx; maxKeys bounds the rows
// it may hold (0 = DefaultMaxKeys).
func Open(tx Tx, q *command.StreamQueryRecord, pid []byte, maxKeys uint32) *State {
	s := &State{tx: tx, prefix: rowsKey(q.StateId, pid), maxKeys: uint64(maxKeys)}
	if s.maxKeys == 0 {
		s.maxKeys = DefaultMaxKeys
	}
	if v := tx.Get(bKeys, s.prefix); len(v) == 8 {
		s.held = binary.BigEndian.Uint64(v)
	}
	return s
}

// Upsert writes key's value at time now; false: a new key would take the
// rows held past the limit (nothing written).
func (s *State) Upsert(key string, value []byte, now int64) bool {
	k := append(bytes.Clone(s.prefix), key...)
	if s.tx.Get(bState, k) == nil {
		if s.held >= s.maxKeys {
			return false
		}
		s.held++
		s.changed = true
	}
	s.tx.Put(bState, k, command.MustEncodeRecord(&command.StreamStateRow{Value: value, UpdatedUs: now}))
	return true
}

// Remove deletes key's row and reports whether there was one.
func (s *State) Remove(key string) bool {
	k := append(bytes.Clone(s.prefix), key...)
	if s.tx.Get(bState, k) == nil {
		return false
	}
	s.tx.Delete(bState, k)
	s.held--
	s.changed = true
	return true
}

// Close records the rows held.
func (s *State) Close() {
	if !s.changed {
		return
	}
	if s.held == 0 {
		s.tx.Delete(bKeys, bytes.Clone(s.prefix))
		return
	}
	s.tx.Put(bKeys, bytes.Clone(s.prefix), binary.BigEndian.AppendUint64(nil, s.held))
}

// Rows reads q's rows in partition pid, by key: the keys named (none: every
// key), whose key starts with prefix, and, where ripe is set, whose value's
// numeric windowEnd is at or before ripeAtOrBefore (rows without one are
// left out), as Queen's server filters them.
func Rows(r store.Reader, q *command.StreamQueryRecord, in *command.StreamStateGet) []*command.StreamStateRowOut {
	base := rowsKey(q.StateId, in.PartitionId)
	var out []*command.StreamStateRowOut
	keep := func(key string, v []byte) {
		row := &command.StreamStateRow{}
		command.MustDecodeRecord(v, row)
		if in.KeyPrefix != "" && !hasPrefix(key, in.KeyPrefix) {
			return
		}
		if in.HasRipe && !ripe(row.Value, in.RipeAtOrBefore) {
			return
		}
		out = append(out, &command.StreamStateRowOut{Key: key, Value: row.Value, UpdatedUs: row.UpdatedUs})
	}
	if len(in.Keys) > 0 {
		for _, key := range sortedUnique(in.Keys) {
			if v := r.Get(bState, append(bytes.Clone(base), key...)); v != nil {
				keep(key, v)
			}
		}
		return out
	}
	from := append(bytes.Clone(base), in.KeyPrefix...)
	c := r.Cursor(bState)
	for k, v := c.Seek(from); k != nil && bytes.HasPrefix(k, from); k, v = c.Next() {
		keep(string(k[len(base):]), v)
	}
	return out
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// ripe reports whether a JSON object's windowEnd is a number at or before ms.
func ripe(value []byte, ms int64) bool {
	var v struct {
		WindowEnd *json.Number `json:"windowEnd"`
	}
	if json.Unmarshal(value, &v) != nil || v.WindowEnd == nil {
		return false
	}
	if n, err := v.WindowEnd.Int64(); err == nil {
		return n <= ms
	}
	f, err := v.WindowEnd.Float64()
	return err == nil && f <= float64(ms)
}

// Sweep removes up to limit rows of buried state generations, and a
// generation's bookkeeping once its rows are gone. It reports how many rows
// it removed and whether more remain.
func Sweep(tx Tx, limit int) (int, bool) {
	removed := 0
	g := tx.Cursor(bGraveyard)
	var doneGens [][]byte
	for gen, _ := g.First(); gen != nil; gen, _ = g.Next() {
		var keys, counts [][]byte
		c := tx.Cursor(bState)
		more := false
		for k, _ := c.Seek(gen); k != nil && bytes.HasPrefix(k, gen); k, _ = c.Next() {
			if removed+len(keys) == limit {
				more = true
				break
			}
			keys = append(keys, bytes.Clone(k))
		}
		kc := tx.Cursor(bKeys)
		for k, _ := kc.Seek(gen); !more && k != nil && bytes.HasPrefix(k, gen); k, _ = kc.Next() {
			counts = append(counts, bytes.Clone(k))
		}
		for _, k := range keys {
			tx.Delete(bState, k)
		}
		removed += len(keys)
		if more {
			finish(tx, doneGens)
			return removed, true
		}
		for _, k := range counts {
			tx.Delete(bKeys, k)
		}
		doneGens = append(doneGens, bytes.Clone(gen))
	}
	finish(tx, doneGens)
	return removed, false
}

func finish(tx Tx, gens [][]byte) {
	for _, g := range gens {
		tx.Delete(bGraveyard, g)
	}
}

// SweepDue reports whether a state generation waits to be swept.
func SweepDue(r store.Reader) bool {
	k, _ := r.Cursor(bGraveyard).First()
	return k != nil
}

// sortedUnique is keys in order, once each (rows are answered by key).
func sortedUnique(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}
