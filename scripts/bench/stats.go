package main

import (
	"math"
	"slices"
	"time"
)

// recorder collects one worker's latencies for one operation; workers own
// their recorders, so recording takes no lock.
type recorder struct{ lat []time.Duration }

func (r *recorder) add(d time.Duration) { r.lat = append(r.lat, d) }

// latSummary is a latency distribution in milliseconds.
type latSummary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// summarize merges the recorders' samples into one distribution.
func summarize(rs []*recorder) latSummary {
	var all []time.Duration
	for _, r := range rs {
		all = append(all, r.lat...)
	}
	slices.Sort(all)
	s := latSummary{Count: len(all)}
	if len(all) == 0 {
		return s
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	s.Mean = ms(sum / time.Duration(len(all)))
	s.P50 = ms(percentile(all, 50))
	s.P90 = ms(percentile(all, 90))
	s.P99 = ms(percentile(all, 99))
	s.P999 = ms(percentile(all, 99.9))
	s.Max = ms(all[len(all)-1])
	return s
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of sorted:
// the smallest sample with at least p% of the samples at or below it.
// It is 0 for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The epsilon keeps float error (99.9/100*1000 = 999.0000000000001)
	// from bumping the rank.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// result is one scenario's outcome, printed as a table row group and, with
// -json, as one JSON object.
type result struct {
	Scenario  string  `json:"scenario"`
	Seconds   float64 `json:"seconds"`
	Conns     int     `json:"conns"`
	Payload   int     `json:"payload_bytes"`
	Messages  int64   `json:"messages"` // confirmed: queued, or acked
	Requests  int64   `json:"requests"`
	MsgPerSec float64 `json:"msgs_per_s"`
	ReqPerSec float64 `json:"reqs_per_s"`
	// Errors counts failed requests plus failed items; none of them is in
	// Messages.
	Errors       int64                 `json:"errors"`
	ErrorKinds   map[string]int64      `json:"error_kinds,omitempty"`
	ErrorSamples []string              `json:"error_samples,omitempty"`
	Latency      map[string]latSummary `json:"latency_ms,omitempty"`
	Extra        map[string]any        `json:"extra,omitempty"`

	ops   []string // latency keys in print order
	notes []string // extra lines for the table
}

func newResult(name string, o *options, conns int, elapsed time.Duration, msgs, reqs int64, errs *tally) *result {
	r := &result{
		Scenario: name, Seconds: round(elapsed.Seconds(), 3), Conns: conns, Payload: o.payload,
		Messages: msgs, Requests: reqs, Latency: map[string]latSummary{}, Extra: map[string]any{},
	}
	if s := elapsed.Seconds(); s > 0 {
		r.MsgPerSec = round(float64(msgs)/s, 1)
		r.ReqPerSec = round(float64(reqs)/s, 1)
	}
	r.Errors = errs.total
	if errs.total > 0 {
		r.ErrorKinds = errs.kinds
		r.ErrorSamples = errs.samples()
	}
	return r
}

func (r *result) addLatency(op string, s latSummary) {
	r.Latency[op] = s
	r.ops = append(r.ops, op)
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}
