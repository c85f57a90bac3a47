// Package history records what the fault tests' clients did: every
// operation with its input, its output and when it was called and
// returned, on the monotonic clock. A client has one operation in flight at
// a time. An operation whose outcome is unknown (a timeout, a 503
// outcome_unknown, a dropped connection) is recorded as such: the checkers
// treat it as "may or may not have happened", never as either.
package history

import (
	"encoding/json"
	"os"
	"sort"
	"sync"
	"time"
)

// Status is how an operation ended.
type Status string

// Operation outcomes.
const (
	OK      Status = "ok"      // it happened, with Output
	Fail    Status = "fail"    // it definitely did not happen
	Unknown Status = "unknown" // it may or may not have happened
)

// Op is one recorded operation.
type Op struct {
	Client int             `json:"client"`
	Kind   string          `json:"kind"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Status Status          `json:"status"`
	Err    string          `json:"error,omitempty"`
	Call   int64           `json:"call"`   // ns since the history began
	Return int64           `json:"return"` // ns since the history began
}

// Recorder collects operations from many clients.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// New starts a history now.
func New() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the history began (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Pending is an operation that was called and has not returned.
type Pending struct {
	r  *Recorder
	op Op
}

// Begin records the call of an operation.
func (r *Recorder) Begin(client int, kind string, input any) *Pending {
	b, _ := json.Marshal(input)
	return &Pending{r: r, op: Op{Client: client, Kind: kind, Input: b, Call: r.Now()}}
}

// End records the return.
func (p *Pending) End(status Status, output any, err error) Op {
	p.op.Return = p.r.Now()
	p.op.Status = status
	if output != nil {
		p.op.Output, _ = json.Marshal(output)
	}
	if err != nil {
		p.op.Err = err.Error()
	}
	p.r.mu.Lock()
	p.r.ops = append(p.r.ops, p.op)
	p.r.mu.Unlock()
	return p.op
}

// Ops returns every recorded operation, ordered by call time.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Len is the number of recorded operations.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// WriteFile saves the history as JSON lines.
func (r *Recorder) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, op := range r.Ops() {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return nil
}
