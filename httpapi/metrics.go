package httpapi

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// apiMetrics count what the API accepted. Names follow Queen's
// queen_cluster_* families (spec §4.13).
type apiMetrics struct {
	requests prometheus.Counter
	pushed   prometheus.Counter
	popped   prometheus.Counter
	acked    *prometheus.CounterVec

	reqCount atomic.Uint64
	msgCount atomic.Uint64
}

type countingCounter struct {
	prometheus.Counter
	n *atomic.Uint64
}

func (c countingCounter) Inc()          { c.n.Add(1); c.Counter.Inc() }
func (c countingCounter) Add(v float64) { c.n.Add(uint64(v)); c.Counter.Add(v) }

func newAPIMetrics(reg prometheus.Registerer) *apiMetrics {
	m := &apiMetrics{}
	requests := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "http", Name: "requests_total", Help: "HTTP requests served.",
	})
	pushed := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "cluster", Name: "push_messages_total",
		Help: "Messages stored by pushes answered here.", ConstLabels: prometheus.Labels{"scope": "cluster"},
	})
	popped := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "cluster", Name: "pop_messages_total",
		Help: "Messages delivered by pops answered here.", ConstLabels: prometheus.Labels{"scope": "cluster"},
	})
	m.acked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "cluster", Name: "ack_total",
		Help: "Successful acks answered here, by result.",
	}, []string{"result"})
	m.requests = countingCounter{requests, &m.reqCount}
	m.pushed = countingCounter{pushed, &m.msgCount}
	m.popped = popped
	if reg != nil {
		reg.MustRegister(requests, pushed, popped, m.acked)
	}
	return m
}

func (m *apiMetrics) snapshotRequests() uint64 { return m.reqCount.Load() }
func (m *apiMetrics) snapshotMessages() uint64 { return m.msgCount.Load() }
