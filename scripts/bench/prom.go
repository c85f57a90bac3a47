package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// promSamples is one scrape of /metrics/prometheus (spec §4.13): sample
// value by series, the series being the metric name plus its label set as
// printed ("go_memstats_heap_alloc_bytes", `queen_timers_fired_total{result="fired"}`).
type promSamples map[string]float64

// scrapeProm reads base's /metrics/prometheus.
func scrapeProm(ctx context.Context, base string) (promSamples, error) {
	c := newClient(base, 1, 10*time.Second)
	defer c.close()
	var buf bytes.Buffer
	status, _, err := c.do(ctx, http.MethodGet, "/metrics/prometheus", nil, &buf)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics/prometheus: HTTP %d", base, status)
	}
	return parseProm(&buf)
}

// scrapeAll scrapes every URL and adds the samples up: a counter or
// histogram that only the leader moves then reads the same on one node and
// on a cluster whose leadership moved during the run.
func scrapeAll(ctx context.Context, urls []string) (promSamples, error) {
	sum := promSamples{}
	for _, u := range urls {
		s, err := scrapeProm(ctx, u)
		if err != nil {
			return nil, err
		}
		for k, v := range s {
			sum[k] += v
		}
	}
	return sum, nil
}

// parseProm reads the text exposition format: comment lines are skipped,
// and a sample line is "series value [timestamp]".
func parseProm(r io.Reader) (promSamples, error) {
	out := promSamples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// Label values may hold spaces; the value follows the closing brace.
		cut := 0
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			cut = i
		}
		j := strings.IndexByte(line[cut:], ' ')
		if j < 0 {
			continue
		}
		series, rest := line[:cut+j], strings.Fields(line[cut+j:])
		if len(rest) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(rest[0], 64); err == nil {
			out[series] = v
		}
	}
	return out, sc.Err()
}

// sumPrefix adds up every series of the metric name (all label sets).
func (p promSamples) sumPrefix(name string) float64 {
	var s float64
	for k, v := range p {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// bucket is one cumulative histogram bucket: count of samples <= le.
type bucket struct {
	le    float64
	count float64
}

// histogram extracts the buckets of an unlabelled histogram metric, sorted
// by bound (the +Inf bucket last).
func (p promSamples) histogram(name string) []bucket {
	prefix := name + `_bucket{le="`
	var bs []bucket
	for k, v := range p {
		if !strings.HasPrefix(k, prefix) || !strings.HasSuffix(k, `"}`) {
			continue
		}
		le, err := strconv.ParseFloat(k[len(prefix):len(k)-2], 64) // ParseFloat reads "+Inf"
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v})
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
	return bs
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// histDelta is after - before, bucket by bucket (the samples observed
// between two scrapes). Buckets missing before count from zero.
func histDelta(before, after []bucket) []bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.le] = b.count
	}
	out := make([]bucket, len(after))
	for i, b := range after {
		out[i] = bucket{b.le, b.count - prev[b.le]}
	}
	return out
}

// histQuantile estimates the q-quantile (0 < q < 1) of cumulative buckets
// the way Prometheus' histogram_quantile does: find the bucket holding rank
// q*total and interpolate linearly inside it (the lowest bucket from 0).
// A rank in the +Inf bucket answers the highest finite bound. It is NaN
// when there are no samples.
func histQuantile(bs []bucket, q float64) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	if !math.IsInf(bs[len(bs)-1].le, 1) || total <= 0 {
		return math.NaN()
	}
	rank := q * total
	for i, b := range bs {
		if b.count < rank {
			continue
		}
		if math.IsInf(b.le, 1) {
			if i == 0 {
				return math.NaN()
			}
			return bs[i-1].le
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = bs[i-1].le, bs[i-1].count
		}
		if b.count == below {
			return b.le
		}
		return lo + (b.le-lo)*(rank-below)/(b.count-below)
	}
	return bs[len(bs)-2].le
}

// applyMix describes what the replicas applied between two scrapes summed
// over n nodes: Raft entries per message by operation (each replica's
// count, so summed over the nodes and divided by n) and the mean entries
// per apply batch (the group commit's size).
func applyMix(before, after promSamples, msgs int64, n int) string {
	const count, batch = "queen_fsm_apply_seconds_count{", "queen_fsm_batch_entries"
	byOp := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, count) {
			continue
		}
		i := strings.Index(k, `op="`)
		if i < 0 {
			continue
		}
		op := k[i+4:]
		op = op[:strings.IndexByte(op, '"')]
		byOp[op] += v - before[k]
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "entries per message")
	for _, op := range ops {
		if byOp[op] > 0 && msgs > 0 {
			fmt.Fprintf(&b, " %s %.3f", op, byOp[op]/float64(n)/float64(msgs))
		}
	}
	batches := after.sumPrefix(batch+"_count") - before.sumPrefix(batch+"_count")
	if batches > 0 {
		fmt.Fprintf(&b, "; %.1f entries per apply batch", (after.sumPrefix(batch+"_sum")-before.sumPrefix(batch+"_sum"))/batches)
	}
	return b.String()
}
