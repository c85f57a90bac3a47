package ctl

import (
	"flag"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Consumer groups (spec §4.11): the list with lag and state, one group per
// queue and partition, seek and delete.

func init() {
	register(
		&command{path: "groups", args: "", nargs: exactly(0),
			summary: "list consumer groups (one row per group and queue, queue mode too) with lag and state",
			setup:   func(*flag.FlagSet) runFunc { return runGroups }},
		&command{path: "group", args: "<group>", nargs: exactly(1),
			summary: "one consumer group: per queue and partition, offsets, pending, lag, lease",
			setup:   func(*flag.FlagSet) runFunc { return runGroup }},
		&command{path: "group seek", args: "<group> <queue> (--to-end | --timestamp T | --partition P)", nargs: exactly(2),
			summary: "move a group's cursors in a queue: to the end, or back/forward to a time; releases its leases there",
			setup:   setupSeek},
		&command{path: "group delete", args: "<group> [--queue Q] [--yes]", nargs: exactly(1),
			summary: "delete a consumer group's cursors and leases (in every queue, or one); asks first unless --yes",
			setup:   setupGroupDelete},
	)
}

func groupPath(g string) string { return "/api/v1/consumer-groups/" + esc(g) }

func runGroups(e *env, _ []string) error {
	var rows []struct {
		Name                  string
		QueueName             string
		Members               int
		PartitionsWithLag     int
		PendingMessages       uint64
		MaxTimeLag            int64
		State                 string
		SubscriptionMode      *string
		SubscriptionTimestamp *string
	}
	raw, err := e.api.get(e.ctx, "/api/v1/consumer-groups", nil, &rows)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "GROUP", "QUEUE", "PARTITIONS", "LAGGING", "PENDING", "MAX LAG", "STATE", "SUBSCRIPTION")
	for _, r := range rows {
		sub := str(r.SubscriptionMode)
		if r.SubscriptionTimestamp != nil {
			sub += " from " + *r.SubscriptionTimestamp
		}
		t.row(r.Name, r.QueueName, strconv.Itoa(r.Members), strconv.Itoa(r.PartitionsWithLag), count(r.PendingMessages),
			seconds(r.MaxTimeLag), r.State, sub)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		e.note("no consumer groups")
	}
	return nil
}

func runGroup(e *env, args []string) error {
	var g struct {
		ConsumerGroup string
		Queues        []struct {
			QueueName  string
			Partitions []struct {
				Partition                      string
				ConsumedOffset, NewestOffset   uint64
				PendingMessages                uint64
				LagSeconds                     int64
				Leased                         bool
				LeaseExpiresAt, LastConsumedAt *string
				RetryCount                     int
			}
		}
	}
	raw, err := e.api.get(e.ctx, groupPath(args[0]), nil, &g)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	now := time.Now()
	t := newTable(e.out, "QUEUE", "PARTITION", "CONSUMED", "NEWEST", "PENDING", "LAG", "LEASE", "RETRIES", "LAST CONSUMED")
	for _, q := range g.Queues {
		for _, p := range q.Partitions {
			lease := ""
			if p.Leased {
				lease = "until " + ago(p.LeaseExpiresAt, now)
			}
			t.row(q.QueueName, p.Partition, strconv.FormatUint(p.ConsumedOffset, 10), strconv.FormatUint(p.NewestOffset, 10),
				count(p.PendingMessages), seconds(p.LagSeconds), lease, strconv.Itoa(p.RetryCount), ago(p.LastConsumedAt, now))
		}
	}
	return t.flush()
}

func setupSeek(fs *flag.FlagSet) runFunc {
	toEnd := fs.Bool("to-end", false, "move every cursor to the newest message (skip the backlog)")
	ts := fs.String("timestamp", "", "move every cursor to the last message at or before this time "+
		"(RFC 3339, a date, or a duration ago: 2h); earlier messages are delivered again")
	partition := fs.String("partition", "", "move only this partition's cursor to its end (made if the group had none)")
	return func(e *env, args []string) error {
		group, queue := args[0], args[1]
		n := 0
		for _, given := range []bool{*toEnd, *ts != "", *partition != ""} {
			if given {
				n++
			}
		}
		if n != 1 {
			return usagef("group seek: give exactly one of --to-end, --timestamp, --partition")
		}
		path := groupPath(group) + "/queues/" + esc(queue) + "/seek"
		body := map[string]any{"toEnd": true}
		if *partition != "" {
			path = groupPath(group) + "/queues/" + esc(queue) + "/partitions/" + esc(*partition) + "/seek"
			body = nil
		} else if *ts != "" {
			when, err := parseWhen(*ts, time.Now())
			if err != nil {
				return err
			}
			body = map[string]any{"timestamp": when}
		}
		var res struct {
			PartitionsUpdated int
			TargetTimestamp   *string
			Updated           bool
			CursorMovedTo     *string
		}
		raw, err := e.api.do(e.ctx, http.MethodPost, path, nil, body, &res)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		switch {
		case *partition != "":
			e.say("group %s on %s/%s: cursor moved to the end (%s)", group, queue, *partition, str(res.CursorMovedTo))
		case *toEnd:
			e.say("group %s on %s: %d partition cursors moved to the end", group, queue, res.PartitionsUpdated)
		default:
			e.say("group %s on %s: %d partition cursors moved to %s", group, queue, res.PartitionsUpdated, str(res.TargetTimestamp))
		}
		return nil
	}
}

func setupGroupDelete(fs *flag.FlagSet) runFunc {
	queue := fs.String("queue", "", "only in this queue")
	keep := fs.Bool("keep-metadata", false, "keep the subscription record (the next pop resumes as subscribed, not afresh)")
	yes := fs.Bool("yes", false, "do not ask")
	return func(e *env, args []string) error {
		group := args[0]
		path, where := groupPath(group), "in every queue"
		if *queue != "" {
			path, where = groupPath(group)+"/queues/"+esc(*queue), "in queue "+*queue
		}
		if err := e.confirm(*yes, "delete consumer group %s %s (its cursors and leases)?", group, where); err != nil {
			return err
		}
		q := url.Values{"deleteMetadata": {strconv.FormatBool(!*keep)}}
		var res struct {
			DeletedPartitions int
			MetadataDeleted   bool
		}
		raw, err := e.api.do(e.ctx, http.MethodDelete, path, q, nil, &res)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		e.say("deleted consumer group %s %s: %d partition cursors%s", group, where, res.DeletedPartitions,
			map[bool]string{true: ", subscription deleted", false: ""}[res.MetadataDeleted])
		return nil
	}
}
