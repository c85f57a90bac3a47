package httpapi

import (
	"context"
	"net/http"
	"slices"
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

// The status page's queue views: GET /status/queues, a queue's page and
// its messages.

// oldestPending is, by queue, the creation time of the oldest message some
// group has not consumed.
func oldestPending(rd *fsm.Reader, now int64) map[string]int64 {
	out := map[string]int64{}
	for _, gq := range rd.ConsumerGroups("", now) {
		for _, p := range gq.Partitions {
			if o := out[gq.Queue]; p.OldestPendingUs != 0 && (o == 0 || p.OldestPendingUs < o) {
				out[gq.Queue] = p.OldestPendingUs
			}
		}
	}
	return out
}

// queueRow is a queue of the status list: resources' row plus what every
// counter of the state says, and how long its oldest pending message
// (for any group) has waited.
func queueRow(rd *fsm.Reader, q *command.QueueRecord, oldest, now int64) map[string]any {
	c := rd.Counts(q, now)
	var lag int64
	if oldest != 0 && now > oldest {
		lag = (now - oldest) / 1e6
	}
	return queueOut(q, map[string]any{"priority": q.Options.GetPriority(), "createdAt": isoMillis(q.CreatedUs),
		"partitions": len(c.Partitions), "messages": statsOut(c.Totals), "lag": map[string]any{"seconds": lag}})
}

// GET /api/v1/status/queues?limit=100&offset=0&namespace&task
func (a *API) statusQueues(w http.ResponseWriter, r *http.Request) {
	limit := int(min(max(queryInt(r, "limit", 100), 1), 1000))
	offset := int(max(queryInt(r, "offset", 0), 0))
	f := newQueueFilter(r)
	f.name = "" // the list is of every queue
	now := a.b.Now()
	// by priority, then name (then tenant, for an admin of every tenant,
	// whose list spans them); the page's rows are made in a second read
	type key struct {
		priority     int64
		name, tenant string
		every        bool
	}
	var all []key
	err := a.eachTenant(r, func(ctx context.Context, name string, every bool) error {
		return a.b.Read(ctx, readLevel(r), func(rd *fsm.Reader) error {
			for _, q := range f.load(rd) {
				all = append(all, key{q.Options.GetPriority(), q.Name, name, every})
			}
			return nil
		})
	})
	if err != nil {
		writeError(w, err)
		return
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].priority != all[j].priority {
			return all[i].priority > all[j].priority
		}
		if all[i].name != all[j].name {
			return all[i].name < all[j].name
		}
		return all[i].tenant < all[j].tenant
	})
	page := all[min(offset, len(all)):min(offset+limit, len(all))]
	rows := make([]map[string]any, len(page))
	byTenant := map[string][]int{} // tenant → its rows of the page
	for i, k := range page {
		byTenant[k.tenant] = append(byTenant[k.tenant], i)
	}
	for name, idx := range byTenant {
		ctx := r.Context()
		if page[idx[0]].every {
			ctx = tenant.With(ctx, name)
		}
		err := a.b.Read(ctx, readLevel(r), func(rd *fsm.Reader) error {
			oldest := oldestPending(rd, now)
			for _, i := range idx {
				q := rd.Queue(page[i].name)
				if q == nil {
					continue // deleted between the reads
				}
				rows[i] = queueRow(rd, q, oldest[q.Name], now)
				if page[i].every {
					withTenant(rows[i], name)
				}
			}
			return nil
		})
		if err != nil {
			writeError(w, err)
			return
		}
	}
	rows = slices.DeleteFunc(rows, func(row map[string]any) bool { return row == nil })
	writeJSON(w, http.StatusOK, map[string]any{"queues": rows,
		"pagination": map[string]any{"limit": limit, "offset": offset, "total": len(all)}})
}

// GET /api/v1/status/queues/:queue[?includePartitions=false]
func (a *API) statusQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if !queueInScope(w, r, name) {
		return
	}
	withParts := r.URL.Query().Get("includePartitions") != "false" && r.URL.Query().Get("includePartitions") != "0"
	now := a.b.Now()
	var out map[string]any
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error {
		q := rd.Queue(name)
		if q == nil {
			return nil
		}
		o := q.Options
		c := rd.Counts(q, now)
		parts := []map[string]any{}
		leases := map[string]int{} // partition id → live leases
		for _, gq := range rd.ConsumerGroups("", now) {
			if gq.Queue == name {
				for _, p := range gq.Partitions {
					if p.Lease != nil {
						leases[string(p.PartitionID)]++
					}
				}
			}
		}
		for _, pc := range c.Partitions {
			if !withParts {
				break
			}
			p := pc.Partition
			// newestMessage is the last push's time, also once the partition
			// holds nothing (resources' detail says null then).
			parts = append(parts, partitionOut(rd, p, map[string]any{"messages": statsOut(pc.Stats), "activeLeases": leases[string(p.Id)],
				"lastActivity": isoOrNil(p.LastCreatedUs), "newestMessage": isoOrNil(p.LastCreatedUs)}))
		}
		out = map[string]any{
			"queue": queueOut(q, map[string]any{"priority": o.GetPriority(), "createdAt": isoMillis(q.CreatedUs),
				"config": optionsPick(o, statusConfigOptions...), "options": optionsOut(o)}),
			"partitions": parts,
			"totals":     map[string]any{"messages": statsOut(c.Totals), "partitions": len(c.Partitions)},
		}
		return nil
	})
	writeQueueView(w, err, out)
}

// GET /api/v1/status/queues/:queue/messages?limit=50&offset=0&status&partition&from&to:
// the message list of one queue (GET /api/v1/messages with queue= set).
func (a *API) statusQueueMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Set("queue", r.PathValue("queue"))
	if q.Get("limit") == "" {
		q.Set("limit", "50")
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	if !queueInScope(w, r, r.PathValue("queue")) {
		return
	}
	a.listMessages(w, r2)
}
