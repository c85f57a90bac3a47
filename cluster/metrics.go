package cluster

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

type metrics struct {
	applySeconds prometheus.Histogram
	applyErrors  *prometheus.CounterVec
	// leaderTransfers: handovers to a group's preferred leader (balance.go)
	leaderTransfers prometheus.Counter
	timersFired     *prometheus.CounterVec
	timerLateness   prometheus.Histogram
	retained        *prometheus.CounterVec
}

// countRetained counts what a Retain entry this node proposed removed.
func (m *metrics) countRetained(r *command.RetainResult) {
	for _, q := range r.Queues {
		for _, c := range []struct {
			reason string
			n      uint64
		}{{"retention", q.Retention}, {"completed", q.Completed}, {"max_wait", q.Evicted}, {"max_wait_removed", q.ExpiredWith},
			{"dead_letters", q.DeadLetters}, {"skipped", q.Skipped}, {"partitions", q.Partitions}} {
			if c.n > 0 {
				m.retained.WithLabelValues(q.Queue, c.reason).Add(float64(c.n))
			}
		}
	}
}

func newMetrics(reg prometheus.Registerer, n *Node) *metrics {
	m := &metrics{
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "queen", Subsystem: "raft", Name: "apply_seconds",
			Help:    "Time from proposing an entry to its apply result on the leader.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14),
		}),
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "queen", Subsystem: "raft", Name: "apply_errors_total",
			Help: "Proposals that did not return a result, by kind.",
		}, []string{"kind"}),
	}
	m.leaderTransfers = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "raft", Name: "leader_balance_transfers_total",
		Help: "Leadership handed by this node to the group's preferred voter, so leaders spread over the nodes (--raft-groups).",
	})
	m.timersFired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "timers", Name: "fired_total",
		Help: "Timers handled by this node's fire steps while leading, by result.",
	}, []string{"result"})
	m.timerLateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "queen", Subsystem: "timers", Name: "lateness_seconds",
		Help:    "Fire time minus due time of fired timers.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14),
	})
	m.retained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "queen", Subsystem: "retention", Name: "removed_total",
		Help: "What this node's retention passes removed while leading, by queue and reason: retention, completed, " +
			"max_wait (unconsumed messages a group skipped), max_wait_removed (messages the max wait removed from the store), dead_letters, skipped (messages groups " +
			"had not consumed when retention removed them), partitions (empty idle partitions).",
	}, []string{"queue", "reason"})
	if reg == nil {
		return m
	}
	reg.MustRegister(m.timersFired, m.timerLateness, m.retained, m.leaderTransfers)
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "queen", Subsystem: "raft", Name: name, Help: help}, fn)
	}
	reg.MustRegister(m.applySeconds, m.applyErrors,
		gauge("state", "Raft role: 0 follower, 1 candidate, 2 leader, 3 shutdown.", func() float64 {
			switch n.raft.State() {
			case raft.Candidate:
				return 1
			case raft.Leader:
				return 2
			case raft.Shutdown:
				return 3
			}
			return 0
		}),
		gauge("term", "Current Raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("commit_index", "Highest committed log index known here.", func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("applied_index", "Highest log index applied to the FSM here.", func() float64 { return float64(n.fsm.AppliedIndex()) }),
		gauge("last_index", "Highest log index stored here.", func() float64 { return float64(n.raft.LastIndex()) }),
		&depthCollector{n: n},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "queen", Name: "parked_pops",
			Help: "Long-poll pops waiting on this node for a change or their timeout."}, func() float64 { return float64(n.ParkedPops()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "queen", Name: "inflight_writes",
			Help: "Writes holding one of this node's --max-inflight slots."}, func() float64 { return float64(len(n.slots)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "queen", Name: "data_disk_free_bytes",
			Help: "Free space on the data dir's filesystem, as admission last sampled it."}, func() float64 { return float64(n.disk.FreeBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "queen", Name: "apply_paused",
			Help: "1 while this node's state machine waits for disk space."}, func() float64 { return b2f(n.disk.Paused()) }),
	)
	return m
}

// depthCollector reports queue and dead-letter depths at scrape time, from
// this node's state.
type depthCollector struct{ n *Node }

var (
	queueDepthDesc  = prometheus.NewDesc("queen_queue_depth", "Messages pending in queue mode, by queue.", []string{"queue", "tenant"}, nil)
	dlqDepthDesc    = prometheus.NewDesc("queen_dlq_depth_by_queue", "Dead letters stored, by queue.", []string{"queue", "tenant"}, nil)
	dlqTotalDesc    = prometheus.NewDesc("queen_dlq_depth", "Dead letters stored.", nil, prometheus.Labels{"scope": "cluster"})
	maintenanceDesc = prometheus.NewDesc("queen_maintenance_mode_enabled",
		"1 while push maintenance is on (mode=push: pushes are buffered) or pop maintenance (mode=pop: pops answer empty).", []string{"mode"}, nil)
	bufferedDesc = prometheus.NewDesc("queen_maintenance_buffered_messages", "Pushes held in the push-maintenance buffer.", nil, nil)
)

func (d *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- dlqDepthDesc
	ch <- dlqTotalDesc
	ch <- maintenanceDesc
	ch <- bufferedDesc
}

func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	now := d.n.Now()
	var dlqTotal float64
	_ = d.n.fsm.Read(func(r *fsm.Reader) error {
		s := r.Switches()
		ch <- prometheus.MustNewConstMetric(maintenanceDesc, prometheus.GaugeValue, b2f(s.PushMaintenance), "push")
		ch <- prometheus.MustNewConstMetric(maintenanceDesc, prometheus.GaugeValue, b2f(s.PopMaintenance), "pop")
		ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(s.Buffered))
		return nil
	})
	for _, key := range d.n.fsm.TenantKeys() {
		name := tenant.Name(key)
		_ = d.n.fsm.ReadAs(key, func(r *fsm.Reader) error {
			for _, q := range r.Queues() {
				c := r.Counts(q, now).Totals
				ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(c.Pending+c.Processing), q.Name, name)
				ch <- prometheus.MustNewConstMetric(dlqDepthDesc, prometheus.GaugeValue, float64(c.DeadLetter), q.Name, name)
				dlqTotal += float64(c.DeadLetter)
			}
			return nil
		})
	}
	ch <- prometheus.MustNewConstMetric(dlqTotalDesc, prometheus.GaugeValue, dlqTotal)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
