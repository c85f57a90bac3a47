package fsm

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the FSM's Prometheus collectors, registered on a registry the
// caller passes in (never the global one: tests run several nodes).
type Metrics struct {
	applySeconds    *prometheus.HistogramVec
	applyPanics     prometheus.Counter
	batchSeconds    prometheus.Histogram
	batchEntries    prometheus.Histogram
	snapshotSeconds prometheus.Histogram
	snapshotBytes   prometheus.Gauge
	conflated       *perMinute
}

// NewMetrics creates and registers the FSM collectors.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "apply_seconds",
			Help:    "Time to apply one command, by operation.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10),
		}, []string{"op"}),
		applyPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "apply_panics_total",
			Help: "Commands whose handler panicked; their writes were discarded.",
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "batch_seconds",
			Help:    "Time to apply and commit (fsync) one batch of entries.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
		}),
		batchEntries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "batch_entries",
			Help:    "Entries applied per batch (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		snapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "snapshot_persist_seconds",
			Help:    "Time to write one snapshot.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 8),
		}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "queen", Subsystem: "fsm", Name: "snapshot_bytes",
			Help: "Size of the last snapshot written.",
		}),
	}
	m.conflated = newPerMinute(prometheus.NewDesc("queen_queue_conflated_per_minute",
		"Messages that conflated deliveries retired undelivered in the last minute, by queue (addendum §8).", []string{"queue"}, nil))
	if reg != nil {
		reg.MustRegister(m.applySeconds, m.applyPanics, m.batchSeconds, m.batchEntries,
			m.snapshotSeconds, m.snapshotBytes, m.conflated)
	}
	return m
}

// perMinute is a gauge by queue of what was counted in the last minute:
// sixty one-second buckets per queue, summed when scraped.
type perMinute struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	by   map[string]*[60]minuteBucket
}

type minuteBucket struct {
	sec int64
	n   uint64
}

func newPerMinute(desc *prometheus.Desc) *perMinute {
	return &perMinute{desc: desc, by: map[string]*[60]minuteBucket{}}
}

func (p *perMinute) add(queue string, n uint64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ring := p.by[queue]
	if ring == nil {
		ring = &[60]minuteBucket{}
		p.by[queue] = ring
	}
	sec := at.Unix()
	b := &ring[sec%60]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n += n
}

// sum is the count of the last minute before at.
func (p *perMinute) sum(queue string, at time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total uint64
	if ring := p.by[queue]; ring != nil {
		for _, b := range ring {
			if at.Unix()-b.sec < 60 {
				total += b.n
			}
		}
	}
	return total
}

func (p *perMinute) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *perMinute) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	p.mu.Lock()
	queues := make([]string, 0, len(p.by))
	for q := range p.by {
		queues = append(queues, q)
	}
	p.mu.Unlock()
	for _, q := range queues {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(p.sum(q, now)), q)
	}
}
