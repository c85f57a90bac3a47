package ctl

import (
	"flag"
	"fmt"
	"net/url"

	queen "github.com/queen-node/queen-node/client"
)

// drain empties a queue in an emergency (a poison message holding up a
// queue): it pops and acks as completed, with the Go client, until a pop
// finds nothing.

func init() {
	register(&command{path: "drain", args: "<queue> [--group G] [--yes]", nargs: exactly(1),
		summary: "pop and ack every message of a queue (or of one group) unprocessed, until it is empty; asks first unless --yes",
		setup:   setupDrain})
}

func setupDrain(fs *flag.FlagSet) runFunc {
	group := fs.String("group", "", "drain for this consumer group (default: queue mode)")
	batch := fs.Int("batch", 100, "messages per pop")
	partitions := fs.Int("partitions", 8, "partitions one pop may claim")
	limit := fs.Int64("limit", 0, "stop after this many (0 = until a pop finds nothing; with producers running that may be never: Ctrl-C stops it)")
	yes := fs.Bool("yes", false, "do not ask")
	return func(e *env, args []string) error {
		queue := args[0]
		if *batch < 1 || *partitions < 1 || *limit < 0 {
			return usagef("drain: --batch and --partitions must be positive, --limit not negative")
		}
		// the depth of what is drained: the group's, or queue mode's (a
		// depth without a group is the worst cursor's, addendum §8)
		depthQ := url.Values{"group": {"__QUEUE_MODE__"}}
		if *group != "" {
			depthQ.Set("group", *group)
		}
		var before struct{ Pending uint64 }
		if _, err := e.api.get(e.ctx, queuePath(queue)+"/depth", depthQ, &before); err != nil {
			return err
		}
		who := "queue " + queue
		if *group != "" {
			who += " for group " + *group
		}
		want := int64(before.Pending)
		if *limit > 0 {
			want = min(want, *limit)
		}
		if before.Pending > 0 {
			if err := e.confirm(*yes, "ack %d pending messages of %s as completed, without processing them?", want, who); err != nil {
				return err
			}
		}
		c, err := e.queen()
		if err != nil {
			return err
		}
		q := c.Queue(queue)
		p := e.progress("drain", "messages", want)
		var drained int64
		var failed error
		for e.ctx.Err() == nil && (*limit == 0 || drained < *limit) {
			n := *batch
			if *limit > 0 {
				n = int(min(int64(n), *limit-drained))
			}
			msgs, err := q.Pop(e.ctx, queen.PopOptions{Group: *group, Batch: n, Partitions: *partitions})
			if err != nil {
				failed = err
				break
			}
			if len(msgs) == 0 {
				break
			}
			settle := make([]queen.Settle, len(msgs))
			for i, m := range msgs {
				settle[i] = queen.Settle{Message: m, Status: queen.Completed}
			}
			res, err := c.AckBatch(e.ctx, settle)
			if err != nil {
				failed = err
				break
			}
			for _, r := range res {
				if r.Success {
					drained++
					p.add(1)
				}
			}
		}
		p.finish()
		var after struct{ Pending, Processing uint64 }
		if _, err := e.api.get(e.ctx, queuePath(queue)+"/depth", depthQ, &after); err != nil && failed == nil {
			failed = err
		}
		if e.json() {
			if err := e.printJSON(map[string]any{"queue": queue, "consumerGroup": nullable(*group), "drained": drained,
				"pending": after.Pending, "processing": after.Processing}); err != nil {
				return err
			}
		} else {
			e.say("drained %d messages of %s; %d still pending, %d processing", drained, who, after.Pending, after.Processing)
		}
		if failed != nil {
			return fmt.Errorf("drain stopped after %d messages: %w", drained, failed)
		}
		if after.Pending > 0 {
			e.note("what is still pending is leased by other consumers, delayed, or arrived meanwhile; run drain again")
		}
		return e.ctx.Err()
	}
}
