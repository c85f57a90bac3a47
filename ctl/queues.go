package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Queues, their depth, and the messages in them (spec §4.8, §4.9,
// addendum §8).

func init() {
	register(
		&command{path: "queues", args: "", nargs: exactly(0),
			summary: "list the queues with their depth: pending, processing and dead letters",
			setup:   func(*flag.FlagSet) runFunc { return runQueues }},
		&command{path: "queue", args: "<queue>", nargs: exactly(1),
			summary: "one queue: totals, options and partitions",
			setup:   func(*flag.FlagSet) runFunc { return runQueue }},
		&command{path: "depth", args: "<queue> [--group G]", nargs: exactly(1),
			summary: "what a queue holds for one group (queue mode by default): pending, processing, ready",
			setup:   setupDepth},
		&command{path: "messages", args: "[--queue Q] [--status S] [--partition P] [--from T] [--to T]", nargs: exactly(0),
			summary: "list messages, newest first (the last hour unless --from)",
			setup:   setupMessages},
		&command{path: "message", args: "<partitionId> <transactionId>", nargs: exactly(2),
			summary: "one message: status, payload, dead letters, consumer groups",
			setup:   func(*flag.FlagSet) runFunc { return runMessage }},
	)
}

// queueRow is a row of GET /api/v1/resources/queues.
type queueRow struct {
	Name       string  `json:"name"`
	Namespace  *string `json:"namespace"`
	Task       *string `json:"task"`
	CreatedAt  *string `json:"createdAt"`
	Partitions int     `json:"partitions"`
	Messages   struct {
		Total, Pending, Processing uint64
	} `json:"messages"`
}

type counters struct {
	Total      uint64 `json:"total"`
	Pending    uint64 `json:"pending"`
	Processing uint64 `json:"processing"`
	Completed  uint64 `json:"completed"`
	Failed     uint64 `json:"failed"`
	DeadLetter uint64 `json:"deadLetter"`
}

// queueDetail is GET /api/v1/resources/queues/:queue.
type queueDetail struct {
	Name       string  `json:"name"`
	Namespace  *string `json:"namespace"`
	Task       *string `json:"task"`
	CreatedAt  *string `json:"createdAt"`
	Partitions []struct {
		ID            string   `json:"id"`
		Name          string   `json:"name"`
		Stats         counters `json:"stats"`
		OldestMessage *string  `json:"oldestMessage"`
		NewestMessage *string  `json:"newestMessage"`
	} `json:"partitions"`
	Totals  counters                   `json:"totals"`
	Options map[string]json.RawMessage `json:"options"`
}

func queuePath(q string) string { return "/api/v1/resources/queues/" + esc(q) }

// runQueues lists the queues; the dead letters of each come from its
// detail (the list does not carry them), fetched four at a time. In JSON
// each row of the API's list gains "deadLetter".
func runQueues(e *env, _ []string) error {
	var list struct {
		Queues []json.RawMessage `json:"queues"`
	}
	if _, err := e.api.get(e.ctx, "/api/v1/resources/queues", nil, &list); err != nil {
		return err
	}
	rows := make([]queueRow, len(list.Queues))
	for i, raw := range list.Queues {
		if err := json.Unmarshal(raw, &rows[i]); err != nil {
			return fmt.Errorf("queue list: %w", err)
		}
	}
	dlq := make([]uint64, len(rows))
	errs := make([]error, len(rows))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, r := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var d queueDetail
			_, err := e.api.get(e.ctx, queuePath(r.Name), nil, &d)
			if isStatus(err, 404) { // deleted since the list
				return
			}
			dlq[i], errs[i] = d.Totals.DeadLetter, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if e.json() {
		out := make([]map[string]json.RawMessage, len(list.Queues))
		for i, raw := range list.Queues {
			if err := json.Unmarshal(raw, &out[i]); err != nil {
				return err
			}
			out[i]["deadLetter"] = json.RawMessage(strconv.FormatUint(dlq[i], 10))
		}
		return e.printJSON(map[string]any{"queues": out})
	}
	now := time.Now()
	t := newTable(e.out, "QUEUE", "PARTITIONS", "PENDING", "PROCESSING", "DLQ", "TOTAL", "CREATED")
	for i, r := range rows {
		t.row(r.Name, strconv.Itoa(r.Partitions), count(r.Messages.Pending), count(r.Messages.Processing),
			count(dlq[i]), count(r.Messages.Total), ago(r.CreatedAt, now))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		e.note("no queues")
	}
	return nil
}

func runQueue(e *env, args []string) error {
	var d queueDetail
	raw, err := e.api.get(e.ctx, queuePath(args[0]), nil, &d)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	now := time.Now()
	opts := make([]string, 0, len(d.Options))
	for k, v := range d.Options {
		if string(v) != "null" {
			opts = append(opts, k+"="+string(v))
		}
	}
	sort.Strings(opts)
	tt := d.Totals
	if err := fields(e.out,
		"queue", d.Name,
		"namespace", str(d.Namespace),
		"task", str(d.Task),
		"created", str(d.CreatedAt)+" ("+ago(d.CreatedAt, now)+")",
		"messages", fmt.Sprintf("%s total, %s pending, %s processing, %s completed, %s failed, %s dead letters",
			count(tt.Total), count(tt.Pending), count(tt.Processing), count(tt.Completed), count(tt.Failed), count(tt.DeadLetter)),
		"options", strings.Join(opts, " "),
	); err != nil {
		return err
	}
	fmt.Fprintln(e.out)
	t := newTable(e.out, "PARTITION", "PENDING", "PROCESSING", "COMPLETED", "TOTAL", "OLDEST", "NEWEST", "ID")
	for _, p := range d.Partitions {
		s := p.Stats
		t.row(p.Name, count(s.Pending), count(s.Processing), count(s.Completed), count(s.Total),
			ago(p.OldestMessage, now), ago(p.NewestMessage, now), p.ID)
	}
	return t.flush()
}

func setupDepth(fs *flag.FlagSet) runFunc {
	group := fs.String("group", "", "consumer group (default: queue mode)")
	return func(e *env, args []string) error {
		q := url.Values{}
		if *group != "" {
			q.Set("group", *group)
		}
		var d struct {
			Queue, Group                       string
			Pending, Processing, Ready         uint64
			PartitionsPending, PartitionsReady uint64
			EffectivePending, EffectiveReady   uint64
			Conflation                         *bool
			Partitions                         []struct {
				Partition                  string
				Pending, Processing, Ready uint64
			}
		}
		raw, err := e.api.get(e.ctx, queuePath(args[0])+"/depth", q, &d)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		conf := "as each pop asks"
		if d.Conflation != nil {
			conf = onOff(*d.Conflation)
		}
		if err := fields(e.out, "queue", d.Queue, "group", d.Group,
			"pending", fmt.Sprintf("%s in %d partitions (effective %s)", count(d.Pending), d.PartitionsPending, count(d.EffectivePending)),
			"processing", count(d.Processing),
			"ready", fmt.Sprintf("%s in %d partitions (effective %s)", count(d.Ready), d.PartitionsReady, count(d.EffectiveReady)),
			"conflation", conf); err != nil {
			return err
		}
		fmt.Fprintln(e.out)
		t := newTable(e.out, "PARTITION", "PENDING", "PROCESSING", "READY")
		for _, p := range d.Partitions {
			t.row(p.Partition, count(p.Pending), count(p.Processing), count(p.Ready))
		}
		return t.flush()
	}
}

// messageRow is a row of GET /api/v1/messages.
type messageRow struct {
	TransactionID  string  `json:"transactionId"`
	PartitionID    string  `json:"partitionId"`
	Queue          string  `json:"queue"`
	Partition      string  `json:"partition"`
	Status         string  `json:"status"`
	CreatedAt      *string `json:"createdAt"`
	LeaseExpiresAt *string `json:"leaseExpiresAt"`
	TraceID        *string `json:"traceId"`
}

func setupMessages(fs *flag.FlagSet) runFunc {
	var f struct{ queue, partition, status, ns, task, from, to string }
	fs.StringVar(&f.queue, "queue", "", "only this queue")
	fs.StringVar(&f.partition, "partition", "", "only this partition (by name)")
	fs.StringVar(&f.status, "status", "", "pending, processing, completed or dead_letter")
	fs.StringVar(&f.ns, "namespace", "", "only queues of this namespace")
	fs.StringVar(&f.task, "task", "", "only queues of this task")
	fs.StringVar(&f.from, "from", "", "from this time (RFC 3339, a date, or a duration ago: 6h); default: an hour before --to")
	fs.StringVar(&f.to, "to", "", "up to this time (default: now)")
	limit := fs.Int("limit", 200, "at most this many (the API allows 1000)")
	offset := fs.Int("offset", 0, "skip this many")
	return func(e *env, _ []string) error {
		q := url.Values{}
		for k, v := range map[string]string{"queue": f.queue, "partition": f.partition, "status": f.status, "ns": f.ns, "task": f.task} {
			if v != "" {
				q.Set(k, v)
			}
		}
		now := time.Now()
		for k, v := range map[string]string{"from": f.from, "to": f.to} {
			if v == "" {
				continue
			}
			ts, err := parseWhen(v, now)
			if err != nil {
				return err
			}
			q.Set(k, ts)
		}
		q.Set("limit", strconv.Itoa(*limit))
		q.Set("offset", strconv.Itoa(*offset))
		var page struct {
			Messages []messageRow
			Mode     struct{ Type string }
		}
		raw, err := e.api.get(e.ctx, "/api/v1/messages", q, &page)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		t := newTable(e.out, "QUEUE", "PARTITION", "TRANSACTION", "STATUS", "CREATED", "LEASE", "PARTITION ID")
		for _, m := range page.Messages {
			t.row(m.Queue, m.Partition, clip(m.TransactionID, 48), m.Status, ago(m.CreatedAt, now), ago(m.LeaseExpiresAt, now), m.PartitionID)
		}
		if err := t.flush(); err != nil {
			return err
		}
		window := "the last hour"
		if f.from != "" {
			window = "since " + q.Get("from")
		}
		e.note("%d messages (offset %d, limit %d; %s)", len(page.Messages), *offset, *limit, window)
		return nil
	}
}

func runMessage(e *env, args []string) error {
	var m struct {
		messageRow
		ID           string          `json:"id"`
		Payload      json.RawMessage `json:"payload"`
		ErrorMessage *string         `json:"errorMessage"`
		RetryCount   *int            `json:"retryCount"`
		ProducerSub  *string         `json:"producerSub"`
		DeadLetters  []struct {
			DlqID, ConsumerGroup, ErrorMessage string
			RetryCount                         int
			FailedAt                           *string
		} `json:"deadLetters"`
		ConsumerGroups []struct {
			Name           string
			Consumed       bool
			LeaseExpiresAt *string
		} `json:"consumerGroups"`
	}
	raw, err := e.api.get(e.ctx, "/api/v1/messages/"+esc(args[0])+"/"+esc(args[1]), nil, &m)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	now := time.Now()
	retries := ""
	if m.RetryCount != nil {
		retries = strconv.Itoa(*m.RetryCount)
	}
	if err := fields(e.out,
		"transaction", m.TransactionID,
		"message id", m.ID,
		"queue", m.Queue+"/"+m.Partition,
		"partition id", m.PartitionID,
		"status", m.Status,
		"created", str(m.CreatedAt)+" ("+ago(m.CreatedAt, now)+")",
		"lease expires", ago(m.LeaseExpiresAt, now),
		"trace", str(m.TraceID),
		"producer", str(m.ProducerSub),
		"error", str(m.ErrorMessage),
		"retries", retries,
	); err != nil {
		return err
	}
	if len(m.ConsumerGroups) > 0 {
		fmt.Fprintln(e.out)
		t := newTable(e.out, "GROUP", "CONSUMED", "LEASE")
		for _, g := range m.ConsumerGroups {
			t.row(g.Name, yesNo(g.Consumed), ago(g.LeaseExpiresAt, now))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(m.DeadLetters) > 0 {
		fmt.Fprintln(e.out)
		t := newTable(e.out, "DLQ ID", "GROUP", "RETRIES", "FAILED", "ERROR")
		for _, d := range m.DeadLetters {
			t.row(d.DlqID, d.ConsumerGroup, strconv.Itoa(d.RetryCount), ago(d.FailedAt, now), clip(d.ErrorMessage, 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.out, "\npayload:")
	return e.printRaw(m.Payload)
}
