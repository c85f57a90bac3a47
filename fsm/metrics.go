package fsm

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the FSM's Prometheus collectors, registered on a registry the
// caller passes in (never the global one: tests run several nodes).
type Metrics struct {
	applySeconds    *prometheus.HistogramVec
	applyPanics     prometheus.Counter
	batchSeconds    prometheus.Histogram
	batchEntries    prometheus.Histogram
	snapshotSeconds prometheus.Histogram
	snapshotBytes   prometheus.Gauge
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
	if reg != nil {
		reg.MustRegister(m.applySeconds, m.applyPanics, m.batchSeconds, m.batchEntries,
			m.snapshotSeconds, m.snapshotBytes)
	}
	return m
}
