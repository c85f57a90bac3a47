package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Dead letters (spec §4.10): the list, replay (one entry each: a new
// message dlq:<dlqId> in the partition, the record gone) and purge.

func init() {
	register(
		&command{path: "dlq", args: "[--queue Q] [--group G] [--partition P]", nargs: exactly(0),
			summary: "list dead letters, newest failure first: error, retries, failed at",
			setup:   setupDLQList},
		&command{path: "dlq replay", args: "<dlqId>... | --queue Q [--group G] (--all | --limit N)", nargs: atLeast(0),
			summary: "put dead letters back into their queue (every group of the queue receives them again)",
			setup:   setupReplay},
		&command{path: "dlq purge", args: "--queue Q [--group G] [--yes]", nargs: exactly(0),
			summary: "delete a queue's dead letters for good; asks first unless --yes",
			setup:   setupPurge},
	)
}

// deadLetter is a row of GET /api/v1/dlq.
type deadLetter struct {
	DlqID         string  `json:"dlqId"`
	TransactionID string  `json:"transactionId"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	ConsumerGroup string  `json:"consumerGroup"`
	ErrorMessage  string  `json:"errorMessage"`
	RetryCount    int     `json:"retryCount"`
	FailedAt      *string `json:"failedAt"`
}

type dlqPage struct {
	Messages []deadLetter `json:"messages"`
	Total    int64        `json:"total"`
}

// dlqFilter is the query of a DLQ list.
func dlqFilter(queue, group string) url.Values {
	q := url.Values{}
	if queue != "" {
		q.Set("queue", queue)
	}
	if group != "" {
		q.Set("consumerGroup", group)
	}
	return q
}

func (e *env) deadLetters(f url.Values, limit, offset int) (*dlqPage, []byte, error) {
	q := url.Values{}
	for k, v := range f {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(limit))
	q.Set("offset", strconv.Itoa(offset))
	var p dlqPage
	raw, err := e.api.get(e.ctx, "/api/v1/dlq", q, &p)
	return &p, raw, err
}

func setupDLQList(fs *flag.FlagSet) runFunc {
	queue := fs.String("queue", "", "only this queue")
	group := fs.String("group", "", "only this consumer group (__QUEUE_MODE__ for queue mode)")
	partition := fs.String("partition", "", "only this partition (by name)")
	from := fs.String("from", "", "failed at or after (RFC 3339, a date, or a duration ago: 6h)")
	to := fs.String("to", "", "failed at or before")
	limit := fs.Int("limit", 100, "at most this many (the API allows 10000)")
	offset := fs.Int("offset", 0, "skip this many")
	return func(e *env, _ []string) error {
		f := dlqFilter(*queue, *group)
		if *partition != "" {
			f.Set("partition", *partition)
		}
		now := time.Now()
		for k, v := range map[string]string{"from": *from, "to": *to} {
			if v != "" {
				ts, err := parseWhen(v, now)
				if err != nil {
					return err
				}
				f.Set(k, ts)
			}
		}
		p, raw, err := e.deadLetters(f, *limit, *offset)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		t := newTable(e.out, "DLQ ID", "QUEUE", "PARTITION", "GROUP", "TRANSACTION", "RETRIES", "FAILED", "ERROR")
		for _, d := range p.Messages {
			t.row(d.DlqID, d.Queue, d.Partition, d.ConsumerGroup, clip(d.TransactionID, 40), strconv.Itoa(d.RetryCount),
				ago(d.FailedAt, now), clip(d.ErrorMessage, 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(p.Messages) == 0 {
			e.note("no dead letters (%d in all)", p.Total)
		} else {
			e.note("dead letters %d-%d of %d", *offset+1, *offset+len(p.Messages), p.Total)
		}
		return nil
	}
}

// replayTally counts replay verdicts.
type replayTally struct {
	Moved     int64    `json:"moved"`
	Duplicate int64    `json:"duplicate"` // kept: the destination's dedup window has dlq:<id>
	Full      int64    `json:"full"`      // kept: the destination is at maxSize
	Gone      int64    `json:"gone"`      // replayed or purged meanwhile
	Failed    int64    `json:"failed"`
	Errors    []string `json:"errors,omitempty"` // the first few failures
}

// replayOne is POST /api/v1/dlq/:id/replay: the raw answer and its
// verdict, or the error.
func (e *env) replayOne(id string, dest map[string]any) ([]byte, string, error) {
	var res struct{ Verdict string }
	var body any
	if len(dest) > 0 {
		body = dest
	}
	raw, err := e.api.do(e.ctx, http.MethodPost, "/api/v1/dlq/"+esc(id)+"/replay", nil, body, &res)
	return raw, res.Verdict, err
}

// replayAll replays ids with `parallel` requests at a time and tallies the
// verdicts; each answer (raw JSON or the error) goes to each, in order.
func (e *env) replayAll(ids []string, dest map[string]any, parallel int, p *progress, t *replayTally,
	each func(i int, raw []byte, verdict string, err error)) {
	var mu sync.Mutex
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, id := range ids {
		if e.ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			raw, verdict, err := e.replayOne(id, dest)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && verdict == "moved":
				t.Moved++
			case err == nil && verdict == "duplicate":
				t.Duplicate++
			case err == nil && verdict == "full":
				t.Full++
			case isStatus(err, http.StatusNotFound):
				t.Gone++
			default:
				t.Failed++
				if err == nil {
					err = fmt.Errorf("unexpected verdict %q", verdict)
				}
				if len(t.Errors) < 5 {
					t.Errors = append(t.Errors, id+": "+err.Error())
				}
			}
			if each != nil {
				each(i, raw, verdict, err)
			}
			if p != nil {
				p.add(1)
			}
		}()
	}
	wg.Wait()
}

func setupReplay(fs *flag.FlagSet) runFunc {
	queue := fs.String("queue", "", "replay dead letters of this queue (with --all or --limit)")
	group := fs.String("group", "", "with --queue: only this consumer group's dead letters")
	all := fs.Bool("all", false, "with --queue: every dead letter of the queue, in pages")
	limit := fs.Int("limit", 0, "with --queue: at most this many, newest first")
	toQueue := fs.String("to-queue", "", "replay into this queue instead of the dead letter's own")
	toPartition := fs.String("to-partition", "", "with --to-queue: into this partition")
	parallel := fs.Int("parallel", 4, "replays in flight at a time")
	page := fs.Int("page", 500, "dead letters listed per page with --queue")
	return func(e *env, ids []string) error {
		dest := map[string]any{}
		if *toQueue != "" {
			dest["queue"] = *toQueue
		}
		if *toPartition != "" {
			if *toQueue == "" {
				return usagef("dlq replay: --to-partition needs --to-queue")
			}
			dest["partition"] = *toPartition
		}
		switch {
		case len(ids) > 0 && (*queue != "" || *all || *limit != 0):
			return usagef("dlq replay: name dead letters by id, or select them with --queue, not both")
		case len(ids) > 0:
			return e.replayIDs(ids, dest, *parallel)
		case *queue == "":
			return usagef("dlq replay: name dead letters by id, or --queue Q with --all or --limit N")
		case *all == (*limit > 0):
			return usagef("dlq replay --queue: give --all (every dead letter) or --limit N (the newest N), one of them")
		case *limit < 0 || *page < 1:
			return usagef("dlq replay: --limit and --page must be positive")
		}
		return e.replayQueue(*queue, *group, *limit, *page, dest, *parallel)
	}
}

// replayIDs replays the dead letters named by id; any that did not move
// makes the exit status 1.
func (e *env) replayIDs(ids []string, dest map[string]any, parallel int) error {
	var t replayTally
	var p *progress
	if len(ids) > 1 {
		p = e.progress("replay", "dead letters", int64(len(ids)))
	}
	results := make([]json.RawMessage, len(ids))
	errs := make([]error, len(ids))
	verdicts := make([]string, len(ids))
	e.replayAll(ids, dest, parallel, p, &t, func(i int, raw []byte, verdict string, err error) {
		results[i], verdicts[i], errs[i] = raw, verdict, err
	})
	if p != nil {
		p.finish()
	}
	if e.json() {
		out := make([]any, len(ids))
		for i := range ids {
			switch {
			case errs[i] == nil:
				out[i] = results[i]
			default:
				fail := map[string]any{"dlqId": ids[i], "success": false, "error": errs[i].Error()}
				var ae *apiError
				if errors.As(errs[i], &ae) {
					fail["status"], fail["error"], fail["code"] = ae.Status, ae.Msg, ae.Code
				}
				out[i] = fail
			}
		}
		if err := e.printJSON(map[string]any{"results": out, "tally": t}); err != nil {
			return err
		}
	} else {
		tb := newTable(e.out, "DLQ ID", "VERDICT", "QUEUE", "PARTITION", "TRANSACTION")
		for i, id := range ids {
			var r struct{ Queue, Partition, TransactionID string }
			_ = json.Unmarshal(results[i], &r)
			v := verdicts[i]
			if errs[i] != nil {
				v = errs[i].Error()
			}
			tb.row(id, v, r.Queue, r.Partition, r.TransactionID)
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	if n := int64(len(ids)) - t.Moved; n > 0 {
		return fmt.Errorf("%d of %d dead letters were not replayed", n, len(ids))
	}
	return e.ctx.Err()
}

// replayQueue lists a queue's dead letters a page at a time and replays
// them until none is left (or limit are done). Records a replay keeps
// (duplicate, full) stay at the head of the newest-first list, so the next
// page starts after them.
func (e *env) replayQueue(queue, group string, limit, pageSize int, dest map[string]any, parallel int) error {
	f := dlqFilter(queue, group)
	first, _, err := e.deadLetters(f, 1, 0)
	if err != nil {
		return err
	}
	if len(first.Messages) > 0 && first.Messages[0].FailedAt != nil {
		// Only what had failed when it started: a replayed message that
		// fails again is a new dead letter, which must not keep this going.
		// The API's times are in ms, its records in µs: the bound is the
		// end of the newest record's millisecond.
		if t, err := time.Parse(time.RFC3339Nano, *first.Messages[0].FailedAt); err == nil {
			f.Set("to", t.Add(time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z"))
		}
	}
	want := first.Total
	if limit > 0 {
		want = min(want, int64(limit))
		pageSize = min(pageSize, limit)
	}
	var t replayTally
	p := e.progress("replay", "dead letters", want)
	seen := map[string]bool{}
	kept, skip := 0, 0
	var done int64
	for e.ctx.Err() == nil && (limit == 0 || done < int64(limit)) {
		page, _, err := e.deadLetters(f, pageSize, kept+skip)
		if err != nil {
			p.finish()
			return err
		}
		if page.Total > want && limit == 0 {
			want = page.Total
			p.grow(want)
		}
		var fresh []string
		for _, d := range page.Messages {
			if !seen[d.DlqID] {
				fresh = append(fresh, d.DlqID)
			}
		}
		if len(fresh) == 0 {
			if len(page.Messages) < pageSize {
				break
			}
			skip += len(page.Messages) // newer dead letters pushed the kept ones down
			continue
		}
		skip = 0
		if limit > 0 {
			fresh = fresh[:min(int64(len(fresh)), int64(limit)-done)]
		}
		for _, id := range fresh {
			seen[id] = true
		}
		before := t
		e.replayAll(fresh, dest, parallel, p, &t, nil)
		done += int64(len(fresh))
		kept += int(t.Duplicate - before.Duplicate + t.Full - before.Full)
		if t.Failed > before.Failed {
			break // the node refuses or is gone: stop here
		}
	}
	p.finish()
	if e.json() {
		if err := e.printJSON(map[string]any{"queue": queue, "consumerGroup": nullable(group), "replayed": t.Moved, "tally": t}); err != nil {
			return err
		}
	} else {
		who := "queue " + queue
		if group != "" {
			who += " (group " + group + ")"
		}
		e.say("replayed %d dead letters of %s: moved %d, kept %d as duplicate, kept %d at maxSize, %d already gone",
			t.Moved, who, t.Moved, t.Duplicate, t.Full, t.Gone)
	}
	if t.Failed > 0 {
		return fmt.Errorf("%d replays failed; the first: %s", t.Failed, t.Errors[0])
	}
	return e.ctx.Err()
}

func setupPurge(fs *flag.FlagSet) runFunc {
	queue := fs.String("queue", "", "the queue whose dead letters go (required)")
	group := fs.String("group", "", "only this consumer group's dead letters")
	yes := fs.Bool("yes", false, "do not ask")
	return func(e *env, _ []string) error {
		if *queue == "" {
			return usagef("dlq purge: --queue is required (a purge removes the dead letters of one queue)")
		}
		f := dlqFilter(*queue, *group)
		first, _, err := e.deadLetters(f, 1, 0)
		if err != nil {
			return err
		}
		who := "queue " + *queue
		if *group != "" {
			who += " (group " + *group + ")"
		}
		if first.Total > 0 {
			if err := e.confirm(*yes, "delete %d dead letters of %s for good?", first.Total, who); err != nil {
				return err
			}
		}
		// One DELETE purges in entries of 10,000 on the node; meanwhile the
		// remaining total is the progress. The DELETE is bounded by Ctrl-C,
		// not --timeout.
		var p *progress
		if first.Total > 0 {
			p = e.progress("purge", "dead letters", first.Total)
		}
		type answer struct {
			raw []byte
			err error
		}
		ans := make(chan answer, 1)
		var res struct{ Purged int64 }
		go func() {
			raw, err := e.api.unbounded().do(e.ctx, http.MethodDelete, "/api/v1/dlq", f, nil, &res)
			ans <- answer{raw, err}
		}()
		var a answer
	wait:
		for {
			select {
			case a = <-ans:
				break wait
			case <-time.After(300 * time.Millisecond):
				if p == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
				var now dlqPage
				_, err := e.api.get(ctx, "/api/v1/dlq", withLimit(f, 1), &now)
				cancel()
				if err == nil {
					p.setDone(max(first.Total-now.Total, 0))
				}
			}
		}
		if p != nil {
			if a.err == nil {
				p.setDone(res.Purged)
			}
			p.finish()
		}
		if a.err != nil {
			return a.err
		}
		if e.json() {
			return e.printRaw(a.raw)
		}
		e.say("purged %d dead letters of %s", res.Purged, who)
		return nil
	}
}

func withLimit(f url.Values, n int) url.Values {
	q := url.Values{"limit": {strconv.Itoa(n)}}
	for k, v := range f {
		q[k] = v
	}
	return q
}
