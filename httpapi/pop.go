package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// Pop limits [ours].
const (
	maxPopBatch   = 10000
	maxPopTimeout = 10 * time.Minute
	defaultWaitMs = 30000
)

// popParams decodes the pop query (spec §4.3). Bad values fall back to the
// defaults; they are never a 4xx.
func (a *API) popParams(r *http.Request) (*fsmpb.Pop, time.Duration) {
	q := r.URL.Query()
	in := &fsmpb.Pop{ConsumerGroup: q.Get("consumerGroup")}
	if in.ConsumerGroup == fsm.QueueModeGroup {
		in.ConsumerGroup = ""
	}
	batch := queryInt(r, "batch", 1)
	if batch < 1 {
		batch = 1
	}
	in.Batch = uint32(min(batch, maxPopBatch))
	parts := queryInt(r, "partitions", 1)
	if parts < 1 {
		parts = 1
	}
	in.Partitions = uint32(min(parts, 1000))
	in.AutoAck = queryBool(r, "autoAck")
	if ls := queryInt(r, "leaseSeconds", 0); ls > 0 {
		in.LeaseSeconds = min(ls, maxSeconds)
	}
	in.Subscription, in.SubscriptionFromUs = a.subscription(q.Get("subscriptionMode"), q.Get("subscriptionFrom"))
	var wait time.Duration
	if queryBool(r, "wait") {
		ms := queryInt(r, "timeout", defaultWaitMs)
		if ms < 0 {
			ms = defaultWaitMs
		}
		wait = time.Duration(min(ms, maxPopTimeout.Milliseconds())) * time.Millisecond
	}
	return in, wait
}

// subscription resolves where a named group's first pop starts (spec §5.7).
func (a *API) subscription(mode, from string) (fsmpb.Pop_Subscription, int64) {
	if from != "" {
		if from == "now" {
			return fsmpb.Pop_NEW, 0
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, from); err == nil {
				return fsmpb.Pop_FROM, t.UnixMicro()
			}
		}
	}
	switch mode {
	case "new", "new-only":
		return fsmpb.Pop_NEW, 0
	case "":
		if a.cfg.DefaultSubscriptionMode == "all" {
			return fsmpb.Pop_DEFAULT_ALL, 0
		}
		return fsmpb.Pop_NEW, 0
	}
	return fsmpb.Pop_DEFAULT_ALL, 0
}

func (a *API) popQueue(w http.ResponseWriter, r *http.Request) {
	in, wait := a.popParams(r)
	in.Queue = r.PathValue("queue")
	a.doPop(w, r, in, wait)
}

func (a *API) popPartition(w http.ResponseWriter, r *http.Request) {
	in, wait := a.popParams(r)
	in.Queue = r.PathValue("queue")
	in.Partition, in.HasPartition = r.PathValue("partition"), true
	in.Partitions = 1
	a.doPop(w, r, in, wait)
}

// popNamespace is GET /api/v1/pop?namespace=&task= (spec §4.3.5).
func (a *API) popNamespace(w http.ResponseWriter, r *http.Request) {
	in, wait := a.popParams(r)
	in.Namespace, in.Task = r.URL.Query().Get("namespace"), r.URL.Query().Get("task")
	if in.Namespace == "" {
		in.Queue = r.URL.Query().Get("queue")
		if in.Queue == "" {
			w.WriteHeader(http.StatusNoContent) // names nothing: nothing to deliver
			return
		}
	}
	a.doPop(w, r, in, wait)
}

type popMessageOut struct {
	ID            *string         `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data"`
	ProducerSub   *string         `json:"producerSub"`
	CreatedAt     string          `json:"createdAt"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	PartitionID   *string         `json:"partitionId"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
	RetryCount    uint32          `json:"retryCount"`
}

type popOut struct {
	Success           bool            `json:"success"`
	Queue             string          `json:"queue"`
	Partition         string          `json:"partition"`
	PartitionID       *string         `json:"partitionId"`
	LeaseID           string          `json:"leaseId"`
	ConsumerGroup     string          `json:"consumerGroup"`
	PartitionsClaimed uint32          `json:"partitionsClaimed"`
	LeaseExpiresAt    *string         `json:"leaseExpiresAt,omitempty"`
	Messages          []popMessageOut `json:"messages"`
}

func (a *API) doPop(w http.ResponseWriter, r *http.Request, in *fsmpb.Pop, wait time.Duration) {
	if checkName("queue", in.Queue) != nil || checkName("consumerGroup", in.ConsumerGroup) != nil ||
		checkName("partition", in.Partition) != nil || checkName("namespace", in.Namespace) != nil ||
		checkName("task", in.Task) != nil {
		w.WriteHeader(http.StatusNoContent) // bad values never 4xx on pop: nothing can match
		return
	}
	res, err := a.b.Pop(r.Context(), in, wait)
	if err != nil {
		writeBackendError(w, err)
		return
	}
	if len(res.Messages) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	group := res.ConsumerGroup
	out := popOut{
		Success: true, Queue: res.Queue, Partition: res.Messages[0].Partition,
		PartitionID: uuidString(res.Messages[0].PartitionId), LeaseID: res.LeaseId,
		ConsumerGroup: group, PartitionsClaimed: res.PartitionsClaimed,
		Messages: make([]popMessageOut, len(res.Messages)),
	}
	if res.LeaseExpiresUs > 0 {
		s := isoMicros(res.LeaseExpiresUs)
		out.LeaseExpiresAt = &s
	}
	for i, m := range res.Messages {
		rec := res.Records[i]
		data := json.RawMessage(rec.Payload)
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out.Messages[i] = popMessageOut{
			ID: uuidString(rec.Id), TransactionID: rec.TransactionId, TraceID: nullable(rec.TraceId),
			Data: data, ProducerSub: nullable(rec.ProducerSub), CreatedAt: isoMicros(rec.CreatedUs),
			Queue: m.Queue, Partition: m.Partition, PartitionID: uuidString(m.PartitionId),
			LeaseID: res.LeaseId, ConsumerGroup: group, RetryCount: m.RetryCount,
		}
	}
	a.m.popped.Add(float64(len(res.Messages)))
	writeJSON(w, http.StatusOK, out)
}
