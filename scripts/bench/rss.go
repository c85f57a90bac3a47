package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	rssPartitions = 32
	rssBatch      = 1000
)

// procFields are the /proc/PID/status lines rss reports, in kB.
var procFields = []string{"VmRSS", "RssAnon", "RssFile", "VmHWM"}

// runRSS pushes o.rssMessages pending messages and reports the node's
// memory and data dir size before and after.
func runRSS(ctx context.Context, o *options) (*result, error) {
	before, berr := readProcStatus(o.pid)
	heapBefore, hbErr := readHeapMetrics(ctx, o.url)
	dirBefore, dbErr := dirSize(o.dataDir)
	queue := queueName("rss")
	fr := fill(ctx, o, queue, rssPartitions, o.rssMessages, rssBatch, o.rssTimeout)
	after, aerr := readProcStatus(o.pid)
	heapAfter, haErr := readHeapMetrics(ctx, o.url)
	dirAfter, daErr := dirSize(o.dataDir)

	r := newResult("rss", o, o.conns, fr.elapsed, fr.queued, fr.reqs, fr.errs)
	r.addLatency("push", fr.lat)
	r.Extra["queue"] = queue
	r.Extra["target_messages"] = o.rssMessages
	r.Extra["partitions"] = rssPartitions
	r.Extra["items_per_request"] = rssBatch
	r.notes = append(r.notes, fmt.Sprintf("%s to %d partitions, %d-byte payloads", fr, rssPartitions, o.payload))
	if fr.queued < int64(o.rssMessages) {
		r.notes = append(r.notes, fmt.Sprintf("WARNING: only %d of %d messages queued (errors or -rss-timeout %v)", fr.queued, o.rssMessages, o.rssTimeout))
	}
	if err := errors.Join(berr, aerr); err != nil {
		r.notes = append(r.notes, "memory not read: "+err.Error())
	} else {
		r.Extra["pid"] = o.pid
		for _, f := range procFields {
			b, a := before[f], after[f]
			r.Extra[f+"_before_kB"], r.Extra[f+"_after_kB"] = b, a
			r.notes = append(r.notes, fmt.Sprintf("%-8s before %8d kB  after %8d kB  delta %+8d kB%s", f, b, a, a-b, perMsg(a-b, 1024, fr.queued)))
		}
	}
	if err := errors.Join(hbErr, haErr); err != nil {
		r.notes = append(r.notes, "Go heap not read: "+err.Error())
	} else {
		for _, k := range heapMetrics {
			b, a := int64(heapBefore[k]), int64(heapAfter[k])
			short := strings.TrimPrefix(k, "go_memstats_")
			r.Extra[short+"_before"], r.Extra[short+"_after"] = b, a
			r.notes = append(r.notes, fmt.Sprintf("%-19s before %s  after %s", short, mib(b), mib(a)))
		}
	}
	if err := errors.Join(dbErr, daErr); err != nil {
		r.notes = append(r.notes, "data dir not measured: "+err.Error())
	} else {
		r.Extra["data_dir"] = o.dataDir
		r.Extra["data_dir_bytes_before"], r.Extra["data_dir_bytes_after"] = dirBefore.apparent, dirAfter.apparent
		r.Extra["data_dir_alloc_bytes_before"], r.Extra["data_dir_alloc_bytes_after"] = dirBefore.allocated, dirAfter.allocated
		r.notes = append(r.notes,
			fmt.Sprintf("data dir (file sizes) before %s  after %s  delta %s%s", mib(dirBefore.apparent), mib(dirAfter.apparent),
				mib(dirAfter.apparent-dirBefore.apparent), perMsg(dirAfter.apparent-dirBefore.apparent, 1, fr.queued)))
		if dirBefore.allocated >= 0 && dirAfter.allocated >= 0 {
			r.notes = append(r.notes,
				fmt.Sprintf("data dir (disk blocks) before %s  after %s  delta %s%s", mib(dirBefore.allocated), mib(dirAfter.allocated),
					mib(dirAfter.allocated-dirBefore.allocated), perMsg(dirAfter.allocated-dirBefore.allocated, 1, fr.queued)))
		}
	}
	if o.cluster != nil && len(o.cluster.Nodes()) == 1 {
		restartAfterKill(ctx, o, r)
	}
	return r, nil
}

// restartAfterKill kill -9s the node bench started, starts it again on the
// same data dir and reports how long it took to answer /health as healthy,
// and its memory then.
func restartAfterKill(ctx context.Context, o *options, r *result) {
	n := o.cluster.Nodes()[0]
	if err := n.Kill(); err != nil {
		r.notes = append(r.notes, "restart not measured: kill: "+err.Error())
		return
	}
	start := time.Now()
	if err := n.Start(ctx); err != nil {
		r.notes = append(r.notes, "restart not measured: start: "+err.Error())
		return
	}
	if err := n.WaitHealthy(ctx, 60*time.Second); err != nil {
		r.notes = append(r.notes, "restart not measured: "+err.Error())
		return
	}
	took := time.Since(start)
	o.pid = n.PID()
	r.Extra["restart_to_healthy_seconds"] = round(took.Seconds(), 3)
	r.notes = append(r.notes, fmt.Sprintf("kill -9, then start to healthy: %.2f s (pid %d)", took.Seconds(), n.PID()))
	if st, err := readProcStatus(n.PID()); err == nil {
		r.Extra["RssAnon_after_restart_kB"] = st["RssAnon"]
		r.notes = append(r.notes, fmt.Sprintf("after restart: VmRSS %d kB, RssAnon %d kB", st["VmRSS"], st["RssAnon"]))
	}
}

// perMsg is " (N B/msg)" for a delta of delta*unit bytes over n messages.
func perMsg(delta, unit, n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f B/msg)", float64(delta*unit)/float64(n))
}

func mib(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}

// readProcStatus reads procFields (kB) from /proc/pid/status.
func readProcStatus(pid int) (map[string]int64, error) {
	if pid <= 0 {
		return nil, errors.New("no -pid given")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range procFields {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/proc/%d/status has no %s", pid, k)
		}
	}
	return out, nil
}

// usage is a directory's total size: file lengths, and disk blocks in use
// (-1 where the platform does not say).
type usage struct{ apparent, allocated int64 }

// dirSize walks dir, skipping files that vanish mid-walk (snapshots come
// and go).
func dirSize(dir string) (usage, error) {
	if dir == "" {
		return usage{}, errors.New("no -data-dir given")
	}
	var u usage
	start := time.Now()
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		u.apparent += info.Size()
		if u.allocated >= 0 {
			if a, ok := allocatedBytes(info); ok {
				u.allocated += a
			} else {
				u.allocated = -1
			}
		}
		if time.Since(start) > 30*time.Second {
			return errors.New("walk took over 30s")
		}
		return nil
	})
	return u, err
}
