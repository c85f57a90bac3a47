package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
)

// writeTable prints one row per (scenario, operation), then each
// scenario's notes and error samples.
func writeTable(w io.Writer, rs []*result) {
	if len(rs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconns\tsecs\tmsgs\tmsg/s\treqs\treq/s\terrors\top\tn\tp50ms\tp90ms\tp99ms\tp999ms\tmaxms\t")
	for _, r := range rs {
		head := fmt.Sprintf("%s\t%d\t%.1f\t%d\t%.0f\t%d\t%.0f\t%d", r.Scenario, r.Conns, r.Seconds,
			r.Messages, r.MsgPerSec, r.Requests, r.ReqPerSec, r.Errors)
		if len(r.ops) == 0 {
			fmt.Fprintf(tw, "%s\t-\t\t\t\t\t\t\t\n", head)
		}
		for i, op := range r.ops {
			if i > 0 {
				head = "\t\t\t\t\t\t\t"
			}
			l := r.Latency[op]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", head, op, l.Count, l.P50, l.P90, l.P99, l.P999, l.Max)
		}
	}
	tw.Flush()
	for _, r := range rs {
		for _, n := range r.notes {
			fmt.Fprintf(w, "%s: %s\n", r.Scenario, n)
		}
		for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
			fmt.Fprintf(w, "%s: ERRORS %s = %d\n", r.Scenario, k, r.ErrorKinds[k])
		}
		for _, s := range r.ErrorSamples {
			fmt.Fprintf(w, "%s: error sample: %s\n", r.Scenario, s)
		}
	}
}

// writeJSON prints r as one line of JSON.
func writeJSON(w io.Writer, r *result) {
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(w, "{\"scenario\":%q,\"marshal_error\":%q}\n", r.Scenario, err.Error())
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}
