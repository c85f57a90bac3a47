package fsm

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/queen-node/queen-node/tenant"
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
	conflated       *conflatedGauge
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
			Help:    "Time to apply and commit one batch of entries to the state file (not fsynced per batch; synced before a snapshot).",
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
	m.conflated = &conflatedGauge{desc: prometheus.NewDesc("queen_queue_conflated_per_minute",
		"Messages that conflated deliveries retired undelivered in the last minute of entry time, by queue (addendum §8).", []string{"queue", "tenant"}, nil)}
	if reg != nil {
		reg.MustRegister(m.applySeconds, m.applyPanics, m.batchSeconds, m.batchEntries,
			m.snapshotSeconds, m.snapshotBytes, m.conflated)
	}
	return m
}

// conflatedGauge is queen_queue_conflated_per_minute: the flow counts
// (flows.go) of the last minute before the last applied entry's time.
type conflatedGauge struct {
	desc *prometheus.Desc
	fsm  atomic.Pointer[FSM] // set by New
}

func (g *conflatedGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *conflatedGauge) Collect(ch chan<- prometheus.Metric) {
	f := g.fsm.Load()
	if f == nil {
		return
	}
	now := f.LastNow()
	by := map[flowKey]uint64{}
	for _, b := range f.flows.Series(FlowQuery{FromUs: now - minuteUs, ToUs: now + 1, AllTenants: true}).Buckets {
		by[flowKey{b.Tenant, b.Queue}] += b.Conflated
	}
	for k, n := range by {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), k.queue, tenant.Name(k.tenant))
	}
}
