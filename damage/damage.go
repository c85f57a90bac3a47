package damage

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Where damage is found.
const (
	MessageFiles = "message_files"
	RaftLog      = "raft_log"
	StateFile    = "state_file"
	Snapshot     = "snapshot"
)

// Report is a node's record of the damage it found. The zero value is not
// usable; New makes one. Its methods are safe for concurrent use.
type Report struct {
	log   *slog.Logger
	found *prometheus.CounterVec

	mu      sync.Mutex
	first   Finding
	count   uint64
	onFirst func(Finding)
}

// OnFirst sets what is called (in its own goroutine) when the first damage
// is found; at once if it already was.
func (r *Report) OnFirst(fn func(Finding)) {
	r.mu.Lock()
	r.onFirst = fn
	first, found := r.first, r.count > 0
	r.mu.Unlock()
	if found {
		go fn(first)
	}
}

// Finding is the first damage a node found.
type Finding struct {
	Where  string    // MessageFiles, RaftLog, StateFile, Snapshot
	Reason string    // the error that found it
	At     time.Time // when
}

// New makes a report that logs to log and counts findings on reg
// (queen_damage_found_total{where}); reg may be nil.
func New(log *slog.Logger, reg prometheus.Registerer) *Report {
	if log == nil {
		log = slog.Default()
	}
	r := &Report{log: log.With("component", "damage"), found: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "queen", Name: "damage_found_total",
		Help: "Reads that found this node's own files damaged (a checksum failed), by where; the bytes were not served.",
	}, []string{"where"})}
	for _, w := range []string{MessageFiles, RaftLog, StateFile, Snapshot} {
		r.found.WithLabelValues(w)
	}
	if reg != nil {
		reg.MustRegister(r.found)
	}
	return r
}

// Note records damage found at where. The first finding and every
// power-of-two count after it are logged (a consumer popping a damaged
// message again and again does not flood the log); every one is counted.
func (r *Report) Note(where string, err error) {
	if r == nil {
		return
	}
	r.found.WithLabelValues(where).Inc()
	r.mu.Lock()
	r.count++
	n := r.count
	var call func(Finding)
	if n == 1 {
		r.first = Finding{Where: where, Reason: err.Error(), At: time.Now()}
		call = r.onFirst
	}
	first := r.first
	r.mu.Unlock()
	if call != nil {
		go call(first)
	}
	if n&(n-1) == 0 {
		r.log.Error("damaged data found on this node's disk; it is not served", "where", where, "error", err, "findings", n)
	}
}

// Damaged returns the first finding and how many there were; ok is false
// while the node found none.
func (r *Report) Damaged() (first Finding, count uint64, ok bool) {
	if r == nil {
		return Finding{}, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.count, r.count > 0
}

// Clear forgets the findings once the damaged files are gone (a node that
// rebuilt its state from the others set them aside): the node is not
// damaged any more, and the next finding is a first one again. The counter
// on /metrics keeps counting.
func (r *Report) Clear() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.first, r.count = Finding{}, 0
	r.mu.Unlock()
}
