package main

import (
	"context"
	"fmt"
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
	out, err := scrapeProm(ctx, base)
	if err != nil {
		return nil, err
	}
	for _, k := range heapMetrics {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/metrics/prometheus has no %s", k)
		}
	}
	return out, nil
}
