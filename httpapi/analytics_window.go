package httpapi

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/queen-node/queen-node/fsm"
)

// The time window of the status and analytics views, and the sums of the
// flow buckets they read (see status.go for where the numbers come from).

const (
	minuteUs = int64(60 * 1e6)
	hourUs   = 60 * minuteUs
	dayUs    = 24 * hourUs
	// maxBuckets bounds a series' length; a longer range gets wider buckets.
	maxBuckets = 1500
)

// window is an analytics request's time range and bucket width.
type window struct {
	fromUs, toUs, bucketUs int64
	interval               string
}

// windowOf reads from, to and interval (minute | hour | day); the default
// range is the last hour for minutes and the last day otherwise.
func (a *API) windowOf(r *http.Request, defInterval string) window {
	q := r.URL.Query()
	w := window{interval: q.Get("interval")}
	switch w.interval {
	case "minute", "hour", "day":
	default:
		w.interval = defInterval
	}
	span := map[string]int64{"minute": minuteUs, "hour": hourUs, "day": dayUs}
	w.bucketUs = span[w.interval]
	now := a.b.Now()
	w.toUs = parseTime(q.Get("to"))
	if w.toUs == 0 {
		w.toUs = now
	}
	w.fromUs = parseTime(q.Get("from"))
	if w.fromUs == 0 || w.fromUs >= w.toUs {
		def := hourUs
		if w.interval != "minute" {
			def = dayUs
		}
		w.fromUs = w.toUs - def
	}
	for (w.toUs-w.fromUs)/w.bucketUs > maxBuckets {
		w.bucketUs *= 2
	}
	return w
}

func (w window) timeRange() map[string]any {
	return map[string]any{"from": isoMillis(w.fromUs), "to": isoMillis(w.toUs), "interval": w.interval,
		"bucketMinutes": w.bucketUs / minuteUs}
}

// starts lists the bucket starts of the window, oldest first.
func (w window) starts() []int64 {
	var out []int64
	for s := w.fromUs - w.fromUs%w.bucketUs; s < w.toUs; s += w.bucketUs {
		out = append(out, s)
	}
	return out
}

func (w window) perSecond(n uint64) float64 {
	return round2(float64(n) / (float64(w.bucketUs) / 1e6))
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// flowTotals sums a series by bucket start (all queues together).
func flowTotals(s fsm.FlowSeries) map[int64]*fsm.FlowCounts {
	return sumFlows(s, func(b fsm.FlowBucket) int64 { return b.StartUs })
}

// sumFlows sums a series' buckets by key.
func sumFlows[K comparable](s fsm.FlowSeries, key func(fsm.FlowBucket) K) map[K]*fsm.FlowCounts {
	out := map[K]*fsm.FlowCounts{}
	for _, b := range s.Buckets {
		c := out[key(b)]
		if c == nil {
			c = &fsm.FlowCounts{}
			out[key(b)] = c
		}
		c.Add(b.FlowCounts)
	}
	return out
}

// throughputRow is one bucket of a throughput series.
func throughputRow(win window, start int64, c *fsm.FlowCounts) map[string]any {
	return map[string]any{"timestamp": isoMillis(start), "ingested": c.Pushed, "processed": c.Consumed,
		"failed": c.Failed, "deadLettered": c.DeadLettered, "popped": c.Popped,
		"ingestedPerSecond": win.perSecond(c.Pushed), "processedPerSecond": win.perSecond(c.Consumed)}
}

func lagOut(c fsm.FlowCounts) (avg, maxLag any) {
	if c.Pops == 0 {
		return nil, nil
	}
	return c.LagSumUs / int64(c.Pops) / 1000, c.LagMaxUs / 1000
}

func rate(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return round2(float64(part) * 100 / float64(whole))
}

// sortedKeys lists a map's keys in order (an empty list, not nil, for an
// empty map: JSON [], not null).
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
