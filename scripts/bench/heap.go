package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// heapMetrics are the Go runtime gauges rss reads from the node's
// /metrics/prometheus (spec §4.13), to tell live heap from memory the
// runtime has not yet returned to the OS.
var heapMetrics = []string{
	"go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes",
	"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
}

// readHeapMetrics scrapes heapMetrics; a node without them is an error.
func readHeapMetrics(ctx context.Context, base string) (map[string]float64, error) {
	c := newClient(base, 1, 10*time.Second)
	defer c.close()
	var buf bytes.Buffer
	status, _, err := c.do(ctx, http.MethodGet, "/metrics/prometheus", nil, &buf)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("/metrics/prometheus: HTTP %d", status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	for _, k := range heapMetrics {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/metrics/prometheus has no %s", k)
		}
	}
	return out, nil
}
