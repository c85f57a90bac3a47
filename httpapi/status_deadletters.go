package httpapi

import (
	"regexp"
	"sort"
	"strings"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
)

// The dead letters of the status views: their error signatures, the
// newest maxSignatureScan of them.

// maxSignatureScan bounds the dead letters read for error signatures
// (the newest ones).
const maxSignatureScan = 10000

// signature is an error text with its variable parts (ids, numbers)
// replaced, so that errors of one cause group together.
var (
	sigUUID   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	sigHex    = regexp.MustCompile(`\b[0-9a-fA-F]{12,}\b`)
	sigNumber = regexp.MustCompile(`\d+(\.\d+)?`)
	sigSpace  = regexp.MustCompile(`\s+`)
)

// ErrorSignature is the group an error text falls in (exported for the
// dashboard's tests).
func ErrorSignature(text string) string {
	s := sigUUID.ReplaceAllString(text, "<id>")
	s = sigHex.ReplaceAllString(s, "<hex>")
	s = sigNumber.ReplaceAllString(s, "<n>")
	s = strings.TrimSpace(sigSpace.ReplaceAllString(s, " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

type signatureRow struct {
	sig, example string
	count        int
	queues       map[string]bool
	groups       map[string]bool
	newestUs     int64
}

// signatures groups dead letters (newest first) by error signature, the
// largest group first.
func signatures(recs []*command.DLQRecord) []map[string]any {
	by := map[string]*signatureRow{}
	for _, d := range recs {
		text := d.Error
		sig := ErrorSignature(text)
		row := by[sig]
		if row == nil {
			row = &signatureRow{sig: sig, example: text, queues: map[string]bool{}, groups: map[string]bool{}}
			by[sig] = row
		}
		row.count++
		row.queues[d.Queue] = true
		row.groups[d.ConsumerGroup] = true
		row.newestUs = max(row.newestUs, d.FailedUs)
	}
	rows := make([]*signatureRow, 0, len(by))
	for _, r := range by {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].count != rows[j].count {
			return rows[i].count > rows[j].count
		}
		return rows[i].sig < rows[j].sig
	})
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = map[string]any{"signature": r.sig, "error": r.example, "count": r.count,
			"queues": sortedKeys(r.queues), "consumerGroups": sortedKeys(r.groups), "lastFailedAt": isoMillis(r.newestUs)}
	}
	return out
}

// deadLetterSummary reads the newest dead letters of the filtered queues:
// how many partitions they are in, and their error signatures. (How many
// there are in all is the queues' counts', queue.Reader.Counts.)
func deadLetterSummary(rd *fsm.Reader, f *queueFilter) (partitions int, sigs []map[string]any, scanned int) {
	recs, _ := rd.Reader.DeadLetters(queue.DLQFilter{Queue: f.name, Limit: maxSignatureScan})
	parts := map[string]bool{}
	var kept []*command.DLQRecord
	for _, d := range recs {
		if f.accepts(d.Queue) {
			kept = append(kept, d)
			parts[string(d.PartitionId)] = true
		}
	}
	return len(parts), signatures(kept), len(recs)
}
