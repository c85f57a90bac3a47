package scrub

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/msgstore"
)

// Options configure a scrubber.
type Options struct {
	// Pacer bounds what a pass reads (shared with the node's other
	// background readers); required.
	Pacer *Pacer
	// Interval is the pause between the end of a pass and the next; 0 =
	// 1 hour.
	Interval time.Duration
	Logger   *slog.Logger
	Registry prometheus.Registerer // nil: no metrics
}

// Scrubber runs passes over one store.
type Scrubber struct {
	store *msgstore.Store
	opts  Options
	m     metrics
}

type metrics struct {
	bytes, records, damaged, passes prometheus.Counter
	progress, lastPass              prometheus.Gauge
}

// New makes a scrubber of store.
func New(store *msgstore.Store, opts Options) *Scrubber {
	if opts.Interval <= 0 {
		opts.Interval = time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Logger = opts.Logger.With("component", "scrub")
	s := &Scrubber{store: store, opts: opts, m: metrics{
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "queen", Subsystem: "scrub", Name: "bytes_total",
			Help: "Bytes of message files the background scrub read and checked."}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "queen", Subsystem: "scrub", Name: "records_total",
			Help: "Message records the background scrub checked against their checksums."}),
		damaged: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "queen", Subsystem: "scrub", Name: "damaged_total",
			Help: "Damaged records the background scrub found (each also counts in queen_damage_found_total)."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "queen", Subsystem: "scrub", Name: "passes_total",
			Help: "Whole passes over the message files the scrub finished."}),
		progress: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "queen", Subsystem: "scrub", Name: "pass_progress_ratio",
			Help: "How far the current pass is, in segments (0 to 1)."}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "queen", Subsystem: "scrub", Name: "last_pass_end_timestamp_seconds",
			Help: "When the last whole pass ended (Unix seconds; 0 = none yet)."}),
	}}
	if opts.Registry != nil {
		opts.Registry.MustRegister(s.m.bytes, s.m.records, s.m.damaged, s.m.passes, s.m.progress, s.m.lastPass)
	}
	return s
}

// Run runs passes until ctx ends.
func (s *Scrubber) Run(ctx context.Context) {
	for {
		start := time.Now()
		checked, damaged, err := s.Pass(ctx)
		if err != nil {
			return // ctx ended
		}
		s.opts.Logger.Info("scrub pass done", "records", checked, "damaged", damaged, "took", time.Since(start).Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.Interval):
		}
	}
}

// Pass checks every segment once; it returns the records checked and the
// damaged ones found, or ctx's error when it ended first.
func (s *Scrubber) Pass(ctx context.Context) (checked, damaged int64, err error) {
	segs := s.store.Segments()
	pace := func(n int) error {
		s.m.bytes.Add(float64(n))
		return s.opts.Pacer.Wait(ctx, n)
	}
	s.m.progress.Set(0)
	for i, ref := range segs {
		n, bad, err := s.store.ScrubSegment(ref, pace)
		checked += n
		damaged += int64(len(bad))
		s.m.records.Add(float64(n))
		s.m.damaged.Add(float64(len(bad)))
		if err != nil {
			return checked, damaged, err
		}
		s.m.progress.Set(float64(i+1) / float64(len(segs)))
	}
	s.m.passes.Inc()
	s.m.progress.Set(1)
	s.m.lastPass.Set(float64(time.Now().Unix()))
	return checked, damaged, nil
}
