package kafka

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the listener's.
type Metrics struct {
	requests  *prometheus.CounterVec
	conns     prometheus.Gauge
	producers prometheus.GaugeFunc
	openTxns  prometheus.Gauge
	staged    prometheus.Gauge
}

// NewMetrics registers the listener's metrics with reg (nil: unregistered).
// producerCount, when set, reads how many producers' states are kept.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queen_kafka_requests_total",
			Help: "Kafka requests answered, by API."}, []string{"api"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "queen_kafka_connections",
			Help: "Open Kafka client connections."}),
		openTxns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "queen_kafka_open_transactions",
			Help: "Kafka transactions staged on this node (it coordinates them while it leads)."}),
		staged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "queen_kafka_staged_bytes",
			Help: "Bytes of records staged by open Kafka transactions on this node."}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.conns, m.openTxns, m.staged)
	}
	return m
}

// WatchProducers registers the gauge of kept producer states, read by count.
func (m *Metrics) WatchProducers(reg prometheus.Registerer, count func() float64) {
	m.producers = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "queen_kafka_producers",
		Help: "Kafka producer states (ids, epochs, sequences) kept in the replicated state."}, count)
	if reg != nil {
		reg.MustRegister(m.producers)
	}
}
