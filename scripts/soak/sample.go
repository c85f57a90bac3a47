package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// nodeSample is one node at one moment; sizes in bytes.
type nodeSample struct {
	messages, raftLog, state, snapshots int64
	rss                                 int64
	snapBytes                           float64 // queen_fsm_snapshot_bytes: the last snapshot
	snapSeconds                         float64 // duration of the snapshots since the last sample (mean), 0 = none
	snapCount, snapSum                  float64
}

func (n nodeSample) dataDir() int64 { return n.messages + n.raftLog + n.state + n.snapshots }

type sample struct {
	at                 time.Duration
	pushed, consumed   int64
	pushRate, consRate float64 // per second since the previous sample
	nodes              []nodeSample
}

type sampler struct {
	o       *options
	nodes   []*nodeproc.Node
	w       *workload
	samples []sample
}

func newSampler(o *options, nodes []*nodeproc.Node, w *workload) *sampler {
	return &sampler{o: o, nodes: nodes, w: w}
}

func (s *sampler) take(ctx context.Context, at time.Duration) {
	cur := sample{at: at, pushed: s.w.pushed.Load(), consumed: s.w.consumed.Load()}
	var prev *sample
	if n := len(s.samples); n > 0 {
		prev = &s.samples[n-1]
		if dt := (at - prev.at).Seconds(); dt > 0 {
			cur.pushRate = float64(cur.pushed-prev.pushed) / dt
			cur.consRate = float64(cur.consumed-prev.consumed) / dt
		}
	}
	for i, n := range s.nodes {
		dd := n.DataDir()
		ns := nodeSample{messages: nodeproc.DirBytes(filepath.Join(dd, "messages")), raftLog: nodeproc.DirBytes(filepath.Join(dd, "raft", "raft.db")),
			state: nodeproc.DirBytes(filepath.Join(dd, "fsm.db")), snapshots: nodeproc.DirBytes(filepath.Join(dd, "raft", "snapshots"))}
		if pid := n.PID(); pid > 0 {
			ns.rss = procRSS(pid)
		}
		m := scrape(ctx, n.URL())
		ns.snapBytes, ns.snapCount, ns.snapSum = m["queen_fsm_snapshot_bytes"], m["queen_fsm_snapshot_persist_seconds_count"], m["queen_fsm_snapshot_persist_seconds_sum"]
		if prev != nil && i < len(prev.nodes) {
			p := prev.nodes[i]
			if dc := ns.snapCount - p.snapCount; dc > 0 {
				ns.snapSeconds = (ns.snapSum - p.snapSum) / dc
			}
		}
		cur.nodes = append(cur.nodes, ns)
	}
	s.samples = append(s.samples, cur)
	n0 := cur.nodes[0]
	fmt.Printf("%7.0fs pushed %9d consumed %9d  %6.0f msg/s  n1: store %s raft %s state %s snaps %s rss %s\n",
		at.Seconds(), cur.pushed, cur.consumed, cur.consRate, mb(n0.messages), mb(n0.raftLog), mb(n0.state), mb(n0.snapshots), mb(n0.rss))
}

func mb(b int64) string { return fmt.Sprintf("%.1fM", float64(b)/(1<<20)) }

// procRSS is VmRSS of pid in bytes (0 when unreadable).
func procRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// scrape reads the unlabelled samples of /metrics/prometheus.
func scrape(ctx context.Context, base string) map[string]float64 {
	out := map[string]float64{}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics/prometheus", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

func (s *sampler) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cw := csv.NewWriter(f)
	head := []string{"seconds", "pushed", "consumed", "push_per_s", "consume_per_s"}
	for i := range s.nodes {
		for _, c := range []string{"store_bytes", "raft_log_bytes", "state_bytes", "snapshots_bytes", "data_dir_bytes", "rss_bytes", "last_snapshot_bytes", "snapshot_seconds"} {
			head = append(head, fmt.Sprintf("n%d_%s", i+1, c))
		}
	}
	cw.Write(head)
	for _, sm := range s.samples {
		row := []string{fmt.Sprintf("%.1f", sm.at.Seconds()), fmt.Sprint(sm.pushed), fmt.Sprint(sm.consumed),
			fmt.Sprintf("%.0f", sm.pushRate), fmt.Sprintf("%.0f", sm.consRate)}
		for _, n := range sm.nodes {
			row = append(row, fmt.Sprint(n.messages), fmt.Sprint(n.raftLog), fmt.Sprint(n.state), fmt.Sprint(n.snapshots),
				fmt.Sprint(n.dataDir()), fmt.Sprint(n.rss), fmt.Sprintf("%.0f", n.snapBytes), fmt.Sprintf("%.4f", n.snapSeconds))
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// slope fits y = a + b·x by least squares over the points after the
// warm-up and returns b and the mean of y.
func slope(xs, ys []float64) (b, mean float64) {
	n := float64(len(xs))
	if n < 2 {
		return 0, 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, sy / n
	}
	return (n*sxy - sx*sy) / d, sy / n
}

// steady are the samples of the steady phase: past the warm-up fraction of
// the time the producers ran, up to their end (the drain after is left out).
func (s *sampler) steady(o *options) []sample {
	var end time.Duration
	for _, sm := range s.samples {
		if sm.pushRate > 0 {
			end = sm.at
		}
	}
	var out []sample
	for _, sm := range s.samples {
		if sm.at.Seconds() >= o.warmup*end.Seconds() && sm.at <= end {
			out = append(out, sm)
		}
	}
	return out
}

func (s *sampler) report(o *options, restarts []restart, w *workload) string {
	var b strings.Builder
	last := s.samples[len(s.samples)-1]
	fmt.Fprintf(&b, "\nsoak: %d messages pushed, %d consumed in %.0f s (%.0f msg/s); %d charged through the marker transaction, %d redelivered and caught by the marker; %d attempts retried (5xx or transport errors), %d requests failed\n",
		last.pushed, last.consumed, last.at.Seconds(), float64(last.consumed)/last.at.Seconds(), w.charged.Load(), w.redelivered.Load(), w.retried.Load(), w.errors.Load())
	if r := w.lastRefusal.Load(); r != nil {
		fmt.Fprintf(&b, "last refused charge: %v\n", r)
	}
	warm := s.steady(o)
	if len(warm) > 0 {
		fmt.Fprintf(&b, "steady phase (%.0f s to %.0f s: after the first %.0f%% of the producing time, before the drain; %d samples): slope per minute (and per cent of the mean per minute)\n",
			warm[0].at.Seconds(), warm[len(warm)-1].at.Seconds(), o.warmup*100, len(warm))
	}
	for i := range s.nodes {
		var xs, dd, store, raft, snaps, rss, snapT, snapN []float64
		for _, sm := range warm {
			n := sm.nodes[i]
			xs = append(xs, sm.at.Minutes())
			dd, store, raft = append(dd, float64(n.dataDir())), append(store, float64(n.messages)), append(raft, float64(n.raftLog))
			snaps, rss = append(snaps, float64(n.snapshots)), append(rss, float64(n.rss))
			if n.snapSeconds > 0 {
				snapT = append(snapT, n.snapSeconds)
				snapN = append(snapN, float64(sm.consumed)/1e6)
			}
		}
		line := func(name string, ys []float64) string {
			sl, mean := slope(xs, ys)
			return fmt.Sprintf("%s %+.2f MiB/min (%+.2f%%, mean %.0f MiB)", name, sl/(1<<20), pct(sl, mean), mean/(1<<20))
		}
		bs, ms := slope(snapN, snapT)
		fmt.Fprintf(&b, "  n%d: %s; %s; %s; %s; %s\n      snapshots: %d, mean %.3f s, %+.4f s per million messages through\n",
			i+1, line("data dir", dd), line("store", store), line("raft log", raft), line("snapshots", snaps), line("RSS", rss), len(snapT), ms, bs)
	}
	for _, r := range restarts {
		fmt.Fprintf(&b, "SIGKILL of follower %s %s, restart to healthy: %.2f s\n", r.node, r.when, r.took.Seconds())
	}
	return b.String()
}

func pct(b, mean float64) float64 {
	if mean == 0 {
		return 0
	}
	return 100 * b / mean
}
