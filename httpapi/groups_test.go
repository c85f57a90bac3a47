package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type groupRow struct {
	Name              string  `json:"name"`
	QueueName         string  `json:"queueName"`
	Members           int     `json:"members"`
	PartitionsWithLag int     `json:"partitionsWithLag"`
	TotalLag          any     `json:"totalLag"`
	State             string  `json:"state"`
	SubscriptionMode  *string `json:"subscriptionMode"`
}

// consumeAll pops and acks everything group g can see in q; it returns the
// transactionIds delivered.
func (l *live) consumeAll(q, g string) []string {
	l.t.Helper()
	var got []string
	for range 100 {
		p := l.pop("/api/v1/pop/queue/" + q + "?batch=100&consumerGroup=" + g + "&subscriptionMode=all")
		if len(p.Messages) == 0 {
			return got
		}
		var acks []string
		for _, m := range p.Messages {
			m.ConsumerGroup = g
			got = append(got, m.TransactionID)
			acks = append(acks, ackBody(m, "completed"))
		}
		l.json("POST", "/api/v1/ack/batch", `{"consumerGroup":"`+g+`","acknowledgments":[`+strings.Join(acks, ",")+`]}`, 200, nil)
	}
	l.t.Fatal("consumeAll did not finish")
	return nil
}

func (l *live) pushN(q, partition, prefix string, n int) {
	l.t.Helper()
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"queue":%q,"partition":%q,"transactionId":"%s%d","payload":%d}`, q, partition, prefix, i, i))
	}
	l.json("POST", "/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, 201, nil)
}

func TestLiveConsumerGroupsListSeekAndDelete(t *testing.T) {
	l := startLive(t)
	l.pushN("cg", "p1", "a", 3)
	l.pushN("cg", "p2", "b", 3)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	l.pushN("cg", "p1", "c", 2)
	l.pushN("cg", "p2", "d", 2)
	if got := l.consumeAll("cg", "billing"); len(got) != 10 {
		t.Fatalf("first pass: %v", got)
	}

	var rows []groupRow
	l.json("GET", "/api/v1/consumer-groups", "", 200, &rows)
	if len(rows) != 1 || rows[0].Name != "billing" || rows[0].QueueName != "cg" || rows[0].Members != 2 ||
		rows[0].PartitionsWithLag != 0 || rows[0].TotalLag != nil || rows[0].State != "Stable" || rows[0].SubscriptionMode == nil {
		t.Fatalf("list: %+v", rows)
	}

	// Bad seeks change nothing.
	for _, body := range []string{`{}`, `{"toEnd":false}`, `{"timestamp":"yesterday"}`, `{"timestamp":5}`, `{"toEnd":"yes"}`, `[1]`} {
		code, b := l.do("POST", "/api/v1/consumer-groups/billing/queues/cg/seek", body)
		if code != 400 || !strings.Contains(string(b), `"error"`) {
			t.Fatalf("seek %s: %d %s", body, code, b)
		}
	}
	code, b := l.do("POST", "/api/v1/consumer-groups/billing/queues/cg/seek", `{}`)
	if code != 400 || !strings.Contains(string(b), "Must specify either 'toEnd': true or 'timestamp'") {
		t.Fatalf("seek without target: %d %s", code, b)
	}
	if got := l.consumeAll("cg", "billing"); len(got) != 0 {
		t.Fatalf("a refused seek moved the group: %v", got)
	}

	// Back to mid: the messages created after it come again, in both partitions.
	var seek map[string]any
	l.json("POST", "/api/v1/consumer-groups/billing/queues/cg/seek", fmt.Sprintf(`{"timestamp":%q}`, mid.Format(time.RFC3339Nano)), 200, &seek)
	if seek["partitionsUpdated"] != float64(2) || seek["seekToEnd"] != false || seek["success"] != true {
		t.Fatalf("seek: %v", seek)
	}
	if got := l.consumeAll("cg", "billing"); strings.Join(sorted(got), ",") != "c0,c1,d0,d1" {
		t.Fatalf("after seek to mid: %v", got)
	}
	// To the beginning (a time before everything): all ten again.
	l.json("POST", "/api/v1/consumer-groups/billing/queues/cg/seek", `{"timestamp":"2000-01-01T00:00:00Z"}`, 200, nil)
	var detail struct {
		Queues []struct {
			Partitions []struct {
				Partition       string `json:"partition"`
				PendingMessages int    `json:"pendingMessages"`
			} `json:"partitions"`
		} `json:"queues"`
	}
	l.json("GET", "/api/v1/consumer-groups/billing", "", 200, &detail)
	if len(detail.Queues) != 1 || len(detail.Queues[0].Partitions) != 2 || detail.Queues[0].Partitions[0].PendingMessages != 5 {
		t.Fatalf("detail: %+v", detail)
	}
	var lag []map[string]any
	l.json("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", "", 200, &lag)
	if len(lag) != 2 {
		t.Fatalf("lagging: %v", lag)
	}
	l.json("GET", "/api/v1/consumer-groups/lagging", "", 200, &lag)
	if len(lag) != 0 {
		t.Fatalf("lagging an hour: %v", lag)
	}
	if code, _ := l.do("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=abc", ""); code != 400 {
		t.Fatalf("bad minLagSeconds: %d", code)
	}

	// A seek releases the group's lease: a pop holding p1 loses it.
	p := l.pop("/api/v1/pop/queue/cg/partition/p1?batch=1&consumerGroup=billing")
	if len(p.Messages) != 1 {
		t.Fatalf("pop before seek: %+v", p)
	}
	p.Messages[0].ConsumerGroup = "billing"
	l.json("POST", "/api/v1/consumer-groups/billing/queues/cg/seek", `{"toEnd":true}`, 200, nil)
	var acks []map[string]any
	l.json("POST", "/api/v1/ack", ackBody(p.Messages[0], "completed"), 200, &acks)
	if acks[0]["success"] != false {
		t.Fatalf("an ack under a lease the seek released: %v", acks)
	}
	if got := l.consumeAll("cg", "billing"); len(got) != 0 {
		t.Fatalf("after toEnd: %v", got)
	}

	// One partition to its end; an unknown one.
	l.pushN("cg", "p2", "e", 2)
	var ps map[string]any
	l.json("POST", "/api/v1/consumer-groups/billing/queues/cg/partitions/p2/seek", "", 200, &ps)
	if ps["updated"] != true || ps["cursorMovedTo"] == nil {
		t.Fatalf("partition seek: %v", ps)
	}
	code, b = l.do("POST", "/api/v1/consumer-groups/billing/queues/cg/partitions/nope/seek", "")
	if code != 404 || !strings.Contains(string(b), `"Partition not found"`) || !strings.Contains(string(b), `"success":false`) {
		t.Fatalf("unknown partition: %d %s", code, b)
	}
	if got := l.consumeAll("cg", "billing"); len(got) != 0 {
		t.Fatalf("after partition seek: %v", got)
	}

	// Subscription: missing field is the spec's 400.
	code, b = l.do("POST", "/api/v1/consumer-groups/billing/subscription", `{}`)
	if code != 400 || !strings.Contains(string(b), "Missing subscriptionTimestamp in request body") {
		t.Fatalf("subscription without timestamp: %d %s", code, b)
	}
	var sub map[string]any
	l.json("POST", "/api/v1/consumer-groups/billing/subscription", `{"subscriptionTimestamp":"2030-01-01T00:00:00Z"}`, 200, &sub)
	if sub["rowsUpdated"] != float64(1) || sub["newTimestamp"] != "2030-01-01T00:00:00.000Z" {
		t.Fatalf("subscription: %v", sub)
	}

	// Delete one queue's group, keeping metadata; then everything.
	var del map[string]any
	l.json("DELETE", "/api/v1/consumer-groups/billing/queues/cg?deleteMetadata=false", "", 200, &del)
	if del["deletedPartitions"] != float64(2) || del["metadataDeleted"] != false || del["queueName"] != "cg" {
		t.Fatalf("delete one queue: %v", del)
	}
	l.json("DELETE", "/api/v1/consumer-groups/billing", "", 200, &del)
	if del["deletedPartitions"] != float64(0) || del["metadataDeleted"] != true {
		t.Fatalf("delete all: %v", del)
	}
	if code, _ := l.do("GET", "/api/v1/consumer-groups/billing", ""); code != 404 {
		t.Fatalf("deleted group still found: %d", code)
	}
	// Re-subscribes afresh: all twelve again.
	if got := l.consumeAll("cg", "billing"); len(got) != 12 {
		t.Fatalf("after delete: %d %v", len(got), got)
	}
	var refresh map[string]any
	l.json("POST", "/api/v1/stats/refresh", "", 200, &refresh)
}

func TestLivePushAndPopMaintenance(t *testing.T) {
	l := startLive(t)
	l.pushN("m", "p", "before", 2)
	for _, body := range []string{`{}`, `{"enabled":"yes"}`, `{"enabled":1}`} {
		code, b := l.do("POST", "/api/v1/system/maintenance", body)
		if code != 400 || !strings.Contains(string(b), "enabled (boolean) is required") {
			t.Fatalf("maintenance %s: %d %s", body, code, b)
		}
	}
	var on map[string]any
	l.json("POST", "/api/v1/system/maintenance", `{"enabled":true}`, 200, &on)
	if on["maintenanceMode"] != true {
		t.Fatalf("on: %v", on)
	}
	var res []map[string]any
	l.json("POST", "/api/v1/push", `{"items":[{"queue":"m","partition":"p","transactionId":"x1","payload":1},{"queue":"m","partition":"p","transactionId":"x2","payload":2}]}`, 201, &res)
	if len(res) != 2 || res[0]["status"] != "buffered" || res[1]["transactionId"] != "x2" {
		t.Fatalf("buffered push: %v", res)
	}
	if got := l.consumeAll("m", "g"); strings.Join(got, ",") != "before0,before1" {
		t.Fatalf("buffered pushes visible: %v", got)
	}
	var st map[string]any
	l.json("GET", "/api/v1/system/maintenance", "", 200, &st)
	if st["bufferedMessages"] != float64(2) || st["maintenanceMode"] != true || st["popMaintenanceMode"] != false {
		t.Fatalf("status: %v", st)
	}
	_, prom := l.do("GET", "/metrics/prometheus", "")
	if !strings.Contains(string(prom), `queen_maintenance_mode_enabled{mode="push"} 1`) {
		t.Fatal("gauge not 1 while on")
	}
	l.json("POST", "/api/v1/system/maintenance", `{"enabled":false}`, 200, &on)
	if on["maintenanceMode"] != false || on["bufferedMessages"] != float64(0) {
		t.Fatalf("off: %v", on)
	}
	if got := l.consumeAll("m", "g"); strings.Join(got, ",") != "x1,x2" {
		t.Fatalf("after maintenance: %v", got)
	}

	// Pop maintenance: every pop answers empty, then everything is there.
	var pm map[string]any
	l.json("POST", "/api/v1/system/maintenance/pop", `{"enabled":true}`, 200, &pm)
	if pm["popMaintenanceMode"] != true {
		t.Fatalf("pop on: %v", pm)
	}
	l.pushN("m", "p", "y", 1)
	if code, _ := l.do("GET", "/api/v1/pop/queue/m?consumerGroup=g", ""); code != 204 {
		t.Fatalf("pop in pop maintenance: %d", code)
	}
	if code, _ := l.do("POST", "/api/v1/system/maintenance/pop", `{"enabled":null}`); code != 400 {
		t.Fatalf("pop maintenance null: %d", code)
	}
	l.json("POST", "/api/v1/system/maintenance/pop", `{"enabled":false}`, 200, nil)
	if got := l.consumeAll("m", "g"); strings.Join(got, ",") != "y0" {
		t.Fatalf("after pop maintenance: %v", got)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
