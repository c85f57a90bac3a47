package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/request"
)

// Consumer groups (spec §4.11): three read views, and the writes (delete,
// subscription, seek), each one entry.

// laggingAfterUs is how long a group's oldest pending message may wait
// before the list calls the group Lagging.
const laggingAfterUs = 5 * 60 * 1e6

func subscriptionOut(gq queue.GroupQueue) (mode, from, created any) {
	s := gq.Subscription
	if s == nil {
		return nil, nil, nil
	}
	if s.Mode == command.GroupRecord_ALL {
		return "all", nil, isoMillis(s.CreatedUs)
	}
	return "timestamp", isoMillis(s.FromUs), isoMillis(s.CreatedUs)
}

// tenantGroup is a consumer group's view of one queue, and its tenant when
// a listing spans every tenant ("" otherwise).
type tenantGroup struct {
	queue.GroupQueue
	tenant string
}

// groups is the tenant's consumer groups (named group, or every one); the
// listings (group "") of an admin of every tenant span the tenants.
func (a *API) groups(r *http.Request, group string) ([]tenantGroup, int64, error) {
	var out []tenantGroup
	now := a.b.Now()
	read := func(ctx context.Context, name string, every bool) error {
		return a.b.Read(ctx, readLevel(r), func(rd *fsm.Reader) error {
			for _, gq := range rd.ConsumerGroups(group, now) {
				if auth.InScope(r.Context(), gq.Queue) { // a scoped token sees its own queues only
					tg := tenantGroup{GroupQueue: gq}
					if every {
						tg.tenant = name
					}
					out = append(out, tg)
				}
			}
			return nil
		})
	}
	if group != "" {
		return out, now, read(r.Context(), "", false)
	}
	return out, now, a.eachTenant(r, read)
}

// withTenant adds a row's tenant to a listing that spans tenants.
func withTenant(row map[string]any, name string) map[string]any {
	if name != "" {
		row["tenant"] = name
	}
	return row
}

// GET /api/v1/consumer-groups: one row per (group, queue), queue mode
// included.
func (a *API) listGroups(w http.ResponseWriter, r *http.Request) {
	gqs, now, err := a.groups(r, "")
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]map[string]any, 0, len(gqs))
	for _, gq := range gqs {
		var lagging int
		var pending uint64
		var maxLag int64
		for _, p := range gq.Partitions {
			if p.Pending > 0 {
				lagging++
			}
			pending += p.Pending
			maxLag = max(maxLag, p.LagUs(now))
		}
		state := "Stable"
		switch {
		case len(gq.Partitions) == 0:
			state = "Dead"
		case maxLag > laggingAfterUs:
			state = "Lagging"
		}
		mode, from, created := subscriptionOut(gq.GroupQueue)
		out = append(out, withTenant(map[string]any{
			"name": gq.Group, "topics": []string{gq.Queue}, "queueName": gq.Queue,
			"members": len(gq.Partitions), "partitionsWithLag": lagging, "totalLag": nil,
			"pendingMessages": pending, "maxTimeLag": maxLag / 1e6, "state": state,
			"subscriptionMode": mode, "subscriptionTimestamp": from, "subscriptionCreatedAt": created,
		}, gq.tenant))
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /api/v1/consumer-groups/lagging?minLagSeconds=N (default 3600): the
// partitions whose oldest pending message is older than N seconds.
func (a *API) laggingGroups(w http.ResponseWriter, r *http.Request) {
	minLag := int64(3600)
	if v := r.URL.Query().Get("minLagSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > request.MaxSeconds {
			writeError(w, request.Bad("minLagSeconds must be a non-negative integer"))
			return
		}
		minLag = n
	}
	gqs, now, err := a.groups(r, "")
	if err != nil {
		writeError(w, err)
		return
	}
	out := []map[string]any{}
	for _, gq := range gqs {
		for _, p := range gq.Partitions {
			if lag := p.LagUs(now); p.Pending > 0 && lag >= minLag*1e6 {
				out = append(out, withTenant(map[string]any{
					"consumerGroup": gq.Group, "queueName": gq.Queue, "partitionName": p.Partition,
					"partitionId": uuidString(p.PartitionID), "pendingMessages": p.Pending,
					"oldestPendingAt": isoMillis(p.OldestPendingUs), "lagSeconds": lag / 1e6,
				}, gq.tenant))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /api/v1/consumer-groups/:group: per queue and partition.
func (a *API) getGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	gqs, now, err := a.groups(r, group)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(gqs) == 0 {
		notFound(w, "Consumer group not found: "+group)
		return
	}
	queues := make([]map[string]any, 0, len(gqs))
	for _, gq := range gqs {
		parts := make([]map[string]any, 0, len(gq.Partitions))
		for _, p := range gq.Partitions {
			row := map[string]any{
				"partition": p.Partition, "partitionId": uuidString(p.PartitionID),
				"consumedOffset": p.Consumed, "newestOffset": p.Last, "pendingMessages": p.Pending,
				"lastConsumedAt": nil, "oldestPendingAt": nil, "lagSeconds": p.LagUs(now) / 1e6,
				"leased": p.Lease != nil, "leaseExpiresAt": nil, "retryCount": p.RetryCount,
				"skippedByRetention": p.Skipped,
			}
			if p.ConsumedUs != 0 {
				row["lastConsumedAt"] = isoMillis(p.ConsumedUs)
			}
			if p.OldestPendingUs != 0 {
				row["oldestPendingAt"] = isoMillis(p.OldestPendingUs)
			}
			if p.Lease != nil {
				row["leaseExpiresAt"] = isoMillis(p.Lease.ExpiresUs)
			}
			parts = append(parts, row)
		}
		mode, from, created := subscriptionOut(gq.GroupQueue)
		queues = append(queues, map[string]any{
			"queueName": gq.Queue, "subscriptionMode": mode, "subscriptionTimestamp": from,
			"subscriptionCreatedAt": created, "partitions": parts,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumerGroup": group, "queues": queues})
}

// deleteMetadataParam is ?deleteMetadata= (default true).
func deleteMetadataParam(r *http.Request) (bool, error) {
	switch r.URL.Query().Get("deleteMetadata") {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, request.Bad("deleteMetadata must be true or false")
}

// DELETE /api/v1/consumer-groups/:group[/queues/:queue].
func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request) {
	group, q := r.PathValue("group"), r.PathValue("queue")
	all := q == "" && r.Pattern == "DELETE /api/v1/consumer-groups/{group}"
	meta, err := deleteMetadataParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	in, err := request.DeleteGroup(group, q, all, meta)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_DeleteGroup{DeleteGroup: in}})
	if !ok {
		return
	}
	d := res.(*command.DeleteGroupResult)
	out := map[string]any{"success": true, "consumerGroup": group, "deletedPartitions": d.DeletedPartitions,
		"metadataDeleted": d.MetadataDeleted}
	if !all {
		out["queueName"] = q
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /api/v1/consumer-groups/:group/subscription {"subscriptionTimestamp"}.
func (a *API) setSubscription(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	raw, given := o["subscriptionTimestamp"]
	ts, isStr := str(raw)
	in, err := request.SetSubscription(r.PathValue("group"), ts, given && isStr)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_SetSubscription{SetSubscription: in}})
	if ok {
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": in.Group,
			"newTimestamp": isoMillis(in.FromUs), "rowsUpdated": res.(*command.SetSubscriptionResult).RowsUpdated})
	}
}

// POST .../queues/:queue/seek {"toEnd":true} or {"timestamp":"ISO"}.
func (a *API) seekQueue(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	toEnd := false
	if raw, has := o["toEnd"]; has {
		if toEnd, has = boolean(raw); !has {
			writeError(w, request.Bad("toEnd must be a boolean"))
			return
		}
	}
	raw, hasTS := o["timestamp"]
	ts, isStr := str(raw)
	if hasTS && !isStr && !toEnd {
		writeError(w, request.Bad("timestamp must be an ISO-8601 string"))
		return
	}
	in, err := request.Seek(r.PathValue("group"), r.PathValue("queue"), toEnd, ts, hasTS)
	s, ok := a.proposeSeek(w, r, in, err)
	if !ok {
		return
	}
	if !s.QueueFound {
		notFound(w, "Queue not found: "+in.Queue)
		return
	}
	var target any
	if !in.ToEnd {
		target = isoMillis(in.TimestampUs)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": in.Group, "queueName": in.Queue,
		"seekToEnd": in.ToEnd, "targetTimestamp": target, "partitionsUpdated": s.PartitionsUpdated})
}

// POST .../queues/:queue/partitions/:partition/seek: that partition to its
// end (a cursor is made when the group had none there).
func (a *API) seekPartition(w http.ResponseWriter, r *http.Request) {
	in, err := request.SeekPartition(r.PathValue("group"), r.PathValue("queue"), r.PathValue("partition"))
	s, ok := a.proposeSeek(w, r, in, err)
	if !ok {
		return
	}
	if !s.PartitionFound {
		writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "error": "Partition not found"})
		return
	}
	var moved any
	if s.CursorMovedToUs != 0 {
		moved = isoMillis(s.CursorMovedToUs)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "consumerGroup": in.Group, "queueName": in.Queue,
		"partitionName": in.Partition, "updated": s.PartitionsUpdated > 0, "cursorMovedTo": moved})
}

// proposeSeek proposes a validated seek (or answers its refusal).
func (a *API) proposeSeek(w http.ResponseWriter, r *http.Request, in *command.Seek, err error) (*command.SeekResult, bool) {
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_Seek{Seek: in}})
	if !ok {
		return nil, false
	}
	return res.(*command.SeekResult), true
}

// POST /api/v1/stats/refresh: the views are computed from the state on
// every read, so there is nothing to refresh; it answers what it did.
func (a *API) statsRefresh(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "statistics are computed on every read"})
}
