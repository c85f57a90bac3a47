package queen_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

func isCode(err error, c codes.Code) bool {
	e, ok := err.(*queen.Error)
	return ok && e.Code == c
}

// Health and locks, typed, on both transports.
func TestHealthAndLocks(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 20*time.Second)
		h, err := c.Health(ctx)
		if err != nil || h.NodeID == "" || h.Role != "leader" || h.Status != "healthy" || h.Term == 0 || !h.StorageReady {
			t.Fatalf("health: %+v %v", h, err)
		}
		l := c.Locks()
		a, err := l.Acquire(ctx, "nightly", 30*time.Second, queen.WithOwner("a"))
		if err != nil || !a.OK || a.Token == 0 || a.Owner != "a" || a.GuardKey == "" || a.ExpiresAt.IsZero() {
			t.Fatalf("acquire: %+v %v", a, err)
		}
		if again, err := l.Acquire(ctx, "nightly", 30*time.Second, queen.WithOwner("a")); err != nil || !again.OK || !again.Already || again.Token != a.Token {
			t.Fatalf("the same owner again: %+v %v", again, err)
		}
		b, err := l.Acquire(ctx, "nightly", 30*time.Second, queen.WithOwner("b"))
		if err != nil || b.OK || b.Reason != "held" || len(b.Holders) != 1 || b.Holders[0].Owner != "a" {
			t.Fatalf("held by another: %+v %v", b, err)
		}
		if g, err := l.Get(ctx, "nightly"); err != nil || !g.Held || len(g.Holders) != 1 {
			t.Fatalf("get: %+v %v", g, err)
		}
		renewed, err := l.Renew(ctx, a, time.Minute)
		if err != nil || !renewed.OK || renewed.Token < a.Token || !renewed.ExpiresAt.After(a.ExpiresAt) {
			t.Fatalf("renew: %+v %v", renewed, err)
		}
		if r, err := l.Release(ctx, renewed); err != nil || !r.OK {
			t.Fatalf("release: %+v %v", r, err)
		}
		if r, err := l.Release(ctx, renewed); err != nil || r.OK || r.Reason != "lost" {
			t.Fatalf("a second release: %+v %v", r, err)
		}
		if g, err := l.Get(ctx, "nightly"); err != nil || g.Held {
			t.Fatalf("get after release: %+v %v", g, err)
		}
		if _, err := l.Acquire(ctx, "bad#name", time.Second); !isCode(err, codes.InvalidArgument) {
			t.Fatalf("a bad name: %v", err)
		}
	})
}

// Consumer-group admin, dead letters, message lookup and traces, typed,
// on both transports.
func TestGroupsDeadLettersAndMessages(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, n *grpctest.Node) {
		ctx := ctxT(t, 30*time.Second)
		jobs := c.Queue("jobs")
		if _, err := jobs.Push(ctx, queen.Msg{TransactionID: "j1", Data: 1}, queen.Msg{TransactionID: "j2", Data: 2}, queen.Msg{TransactionID: "j3", Data: 3}); err != nil {
			t.Fatal(err)
		}
		msgs, err := jobs.Pop(ctx, queen.PopOptions{Group: "g1", Subscription: queen.SubscribeAll})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("pop: %v %v", msgs, err)
		}
		if err := c.Ack(ctx, msgs[0]); err != nil {
			t.Fatal(err)
		}
		gqs, err := c.Groups().List(ctx, "g1")
		if err != nil || len(gqs) != 1 || gqs[0].Queue != "jobs" || len(gqs[0].Partitions) != 1 || gqs[0].Partitions[0].Pending != 2 ||
			gqs[0].SubscriptionMode != "all" {
			t.Fatalf("groups: %+v %v", gqs, err)
		}
		if all, err := c.Groups().List(ctx, ""); err != nil || len(all) == 0 {
			t.Fatalf("every group: %+v %v", all, err)
		}
		if s, err := c.Groups().SeekToEnd(ctx, "g1", "jobs", ""); err != nil || s.PartitionsUpdated != 1 {
			t.Fatalf("seek to the end: %+v %v", s, err)
		}
		if gqs, _ = c.Groups().List(ctx, "g1"); gqs[0].Partitions[0].Pending != 0 {
			t.Fatalf("after the seek: %+v", gqs)
		}
		if s, err := c.Groups().SeekTo(ctx, "g1", "jobs", time.Unix(1, 0)); err != nil || s.PartitionsUpdated != 1 {
			t.Fatalf("seek back: %+v %v", s, err)
		}
		if gqs, _ = c.Groups().List(ctx, "g1"); gqs[0].Partitions[0].Pending != 3 {
			t.Fatalf("after seeking back: %+v", gqs)
		}
		if _, err := c.Groups().SeekToEnd(ctx, "g1", "nope", ""); !isCode(err, codes.NotFound) {
			t.Fatalf("seek of no queue: %v", err)
		}
		if d, err := c.Groups().Delete(ctx, "g1", "", false); err != nil || d.DeletedPartitions != 1 || !d.MetadataDeleted {
			t.Fatalf("delete: %+v %v", d, err)
		}
		if gqs, err = c.Groups().List(ctx, "g1"); err != nil && !isCode(err, codes.NotFound) || len(gqs) != 0 {
			t.Fatalf("after the delete: %+v %v", gqs, err)
		}

		// Dead letters.
		bad := c.Queue("bad")
		if _, err := bad.Push(ctx, queen.Msg{TransactionID: "b1", Data: map[string]int{"b": 1}}); err != nil {
			t.Fatal(err)
		}
		m, err := bad.Pop(ctx, queen.PopOptions{})
		if err != nil || len(m) != 1 {
			t.Fatalf("pop bad: %v %v", m, err)
		}
		if err := c.AckStatus(ctx, m[0], queen.DeadLetter, "boom"); err != nil {
			t.Fatal(err)
		}
		info, err := c.Message(ctx, m[0].PartitionID, "b1")
		if err != nil || info.Status != "dead_letter" || info.Queue != "bad" || !strings.Contains(string(info.Data), `"b":1`) {
			t.Fatalf("message: %+v %v", info, err)
		}
		if _, err := c.Message(ctx, m[0].PartitionID, "nope"); !isCode(err, codes.NotFound) {
			t.Fatalf("no such message: %v", err)
		}
		// A trace (recorded over HTTP: the typed call is the read).
		body := fmt.Sprintf(`{"transactionId":"b1","partitionId":%q,"traceNames":["audit"],"eventType":"info","data":{"step":1}}`, m[0].PartitionID)
		if r, err := http.Post(n.HTTPURL+"/api/v1/traces", "application/json", strings.NewReader(body)); err != nil || r.StatusCode >= 300 {
			t.Fatalf("record a trace: %v %v", r, err)
		}
		if trs, err := c.Traces(ctx, m[0].PartitionID, "b1"); err != nil || len(trs) != 1 || trs[0].Names[0] != "audit" || !strings.Contains(string(trs[0].Data), "step") {
			t.Fatalf("traces: %+v %v", trs, err)
		}
		page, err := c.DeadLetters().List(ctx, queen.DLQFilter{Queue: "bad"})
		if err != nil || page.Total != 1 || len(page.DeadLetters) != 1 || page.DeadLetters[0].Error != "boom" || page.DeadLetters[0].TransactionID != "b1" {
			t.Fatalf("dead letters: %+v %v", page, err)
		}
		rep, err := c.DeadLetters().Replay(ctx, page.DeadLetters[0].DlqID)
		if err != nil || rep.Verdict != "moved" || rep.Queue != "bad" || !strings.HasPrefix(rep.TransactionID, "dlq:") {
			t.Fatalf("replay: %+v %v", rep, err)
		}
		if _, err := c.DeadLetters().Replay(ctx, page.DeadLetters[0].DlqID); !isCode(err, codes.NotFound) {
			t.Fatalf("a second replay: %v", err)
		}
		m, _ = bad.Pop(ctx, queen.PopOptions{})
		if len(m) != 1 {
			t.Fatalf("the replayed message: %v", m)
		}
		c.AckStatus(ctx, m[0], queen.DeadLetter, "again")
		if n, err := c.DeadLetters().Purge(ctx, "bad", ""); err != nil || n != 1 {
			t.Fatalf("purge: %d %v", n, err)
		}
		if page, err = c.DeadLetters().List(ctx, queen.DLQFilter{Queue: "bad"}); err != nil || page.Total != 0 {
			t.Fatalf("after the purge: %+v %v", page, err)
		}
	})
}
