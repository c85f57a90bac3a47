package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/queen-node/queen-node/request"
)

// popQuery decodes the pop query (spec §4.3): bad values fall back to the
// defaults (package request), never a 4xx.
func popQuery(r *http.Request) request.Pop {
	q := r.URL.Query()
	in := request.Pop{
		ConsumerGroup: q.Get("consumerGroup"), Batch: queryInt(r, "batch", 1), Partitions: queryInt(r, "partitions", 1),
		AutoAck: queryBool(r, "autoAck"), LeaseSeconds: queryInt(r, "leaseSeconds", 0),
		SubscriptionMode: q.Get("subscriptionMode"), SubscriptionFrom: q.Get("subscriptionFrom"),
	}
	if v := q.Get("conflation"); v != "" {
		on := queryBool(r, "conflation")
		in.Conflation = &on
	}
	if queryBool(r, "wait") {
		ms := queryInt(r, "timeout", request.DefaultPopWait.Milliseconds())
		if ms < 0 {
			ms = request.DefaultPopWait.Milliseconds()
		}
		in.Wait = time.Duration(min(ms, request.MaxPopWait.Milliseconds())) * time.Millisecond
	}
	return in
}

func (a *API) popQueue(w http.ResponseWriter, r *http.Request) {
	in := popQuery(r)
	in.Queue = r.PathValue("queue")
	a.doPop(w, r, in)
}

func (a *API) popPartition(w http.ResponseWriter, r *http.Request) {
	in := popQuery(r)
	in.Queue = r.PathValue("queue")
	in.Partition, in.HasPartition = r.PathValue("partition"), true
	a.doPop(w, r, in)
}

// popNamespace is GET /api/v1/pop?namespace=&task= (spec §4.3.5).
func (a *API) popNamespace(w http.ResponseWriter, r *http.Request) {
	in := popQuery(r)
	in.Namespace, in.Task = r.URL.Query().Get("namespace"), r.URL.Query().Get("task")
	if in.Namespace == "" {
		in.Queue = r.URL.Query().Get("queue")
		if in.Queue == "" {
			w.WriteHeader(http.StatusNoContent) // names nothing: nothing to deliver
			return
		}
	}
	a.doPop(w, r, in)
}

func (a *API) doPop(w http.ResponseWriter, r *http.Request, decoded request.Pop) {
	in, wait, match, err := a.rules.Pop(decoded)
	if err != nil {
		writeError(w, err)
		return
	}
	if !match {
		w.WriteHeader(http.StatusNoContent) // bad values never 4xx on pop: nothing can match
		return
	}
	res, err := a.pipe.Pop(r.Context(), in, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(res.Messages) == 0 {
		if in.HasConflation { // a pop that names the flag is answered with the echoes, even with nothing (addendum §8)
			b := append([]byte(`{"success":true,"queue":`), strconv.Quote(res.Queue)...)
			writeRawJSON(w, http.StatusOK, append(append(appendConflation(b, res), `,"messages":[]}`...), '\n'))
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	a.m.popped.Add(float64(len(res.Messages)))
	size := 512
	for _, rec := range res.Records {
		size += 400 + len(rec.Payload)
	}
	writeRawJSON(w, http.StatusOK, appendPopResult(make([]byte, 0, size), res))
}
