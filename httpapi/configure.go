package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// Options a queue accepts (spec §4.1); unknown options are ignored.
var intOptions = map[string]func(o *fsmpb.QueueOptions, v int64){
	"leaseTime":                 func(o *fsmpb.QueueOptions, v int64) { o.LeaseTime = &v },
	"retryLimit":                func(o *fsmpb.QueueOptions, v int64) { o.RetryLimit = &v },
	"retryDelay":                func(o *fsmpb.QueueOptions, v int64) { o.RetryDelay = &v },
	"maxSize":                   func(o *fsmpb.QueueOptions, v int64) { o.MaxSize = &v },
	"delayedProcessing":         func(o *fsmpb.QueueOptions, v int64) { o.DelayedProcessing = &v },
	"windowBuffer":              func(o *fsmpb.QueueOptions, v int64) { o.WindowBuffer = &v },
	"priority":                  func(o *fsmpb.QueueOptions, v int64) { o.Priority = &v },
	"ttl":                       func(o *fsmpb.QueueOptions, v int64) { o.Ttl = &v },
	"retentionSeconds":          func(o *fsmpb.QueueOptions, v int64) { o.RetentionSeconds = &v },
	"completedRetentionSeconds": func(o *fsmpb.QueueOptions, v int64) { o.CompletedRetentionSeconds = &v },
	"maxWaitTimeSeconds":        func(o *fsmpb.QueueOptions, v int64) { o.MaxWaitTimeSeconds = &v },
	"dedupWindowSeconds":        func(o *fsmpb.QueueOptions, v int64) { o.DedupWindowSeconds = &v },
}

var boolOptions = map[string]func(o *fsmpb.QueueOptions, v bool){
	"retentionEnabled":   func(o *fsmpb.QueueOptions, v bool) { o.RetentionEnabled = &v },
	"deadLetterQueue":    func(o *fsmpb.QueueOptions, v bool) { o.DeadLetterQueue = &v },
	"dlqAfterMaxRetries": func(o *fsmpb.QueueOptions, v bool) { o.DlqAfterMaxRetries = &v },
	"encryptionEnabled":  func(o *fsmpb.QueueOptions, v bool) { o.EncryptionEnabled = &v },
}

// priority may be negative; every other number is a size or a duration.
func parseOptions(raw object) (*fsmpb.QueueOptions, error) {
	opts := &fsmpb.QueueOptions{}
	for name, v := range raw {
		if !present(v) {
			continue // null: not named
		}
		if set, ok := intOptions[name]; ok {
			n, ok := integer(v)
			if !ok {
				return nil, bad("options." + name + " must be an integer")
			}
			if n < 0 && name != "priority" {
				return nil, bad("options." + name + " must not be negative")
			}
			limit := int64(maxSeconds)
			if name == "retryDelay" {
				limit = maxSeconds * 1000 // milliseconds
			}
			if n > limit || n < -limit {
				return nil, bad("options." + name + " is too large")
			}
			set(opts, n)
		} else if set, ok := boolOptions[name]; ok {
			b, ok := boolean(v)
			if !ok {
				return nil, bad("options." + name + " must be a boolean")
			}
			set(opts, b)
		}
	}
	return opts, nil
}

func (a *API) configure(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	q, ok := str(o["queue"])
	if !ok {
		writeError(w, http.StatusBadRequest, "queue is required")
		return
	}
	if err := checkName("queue", q); err != nil {
		writeDecodeError(w, err)
		return
	}
	in := &fsmpb.Configure{Queue: q, Options: &fsmpb.QueueOptions{}}
	if raw := o["namespace"]; present(raw) {
		if in.Namespace, ok = str(raw); !ok {
			writeError(w, http.StatusBadRequest, "namespace must be a string or null")
			return
		}
		in.HasNamespace = true
	}
	if raw := o["task"]; present(raw) {
		if in.Task, ok = str(raw); !ok {
			writeError(w, http.StatusBadRequest, "task must be a string or null")
			return
		}
		in.HasTask = true
	}
	if raw := o["options"]; present(raw) {
		ro, ok := asObject(raw)
		if !ok {
			writeError(w, http.StatusBadRequest, "options must be an object")
			return
		}
		if in.Options, err = parseOptions(ro); err != nil {
			writeDecodeError(w, err)
			return
		}
	}
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_Configure{Configure: in}})
	if err != nil {
		writeBackendError(w, err)
		return
	}
	cr := res.(*fsmpb.ConfigureResult)
	writeJSON(w, http.StatusOK, map[string]any{
		"configured": true, "queueId": uuidString(cr.QueueId), "partitionId": uuidString(cr.PartitionId),
		"queue": cr.Queue, "namespace": cr.Namespace, "task": cr.Task, "options": optionsOut(cr.Options),
	})
}

func optionsOut(o *fsmpb.QueueOptionsOut) map[string]any {
	return map[string]any{
		"priority": o.Priority, "leaseTime": o.LeaseTime, "retryLimit": o.RetryLimit,
		"retryDelay": o.RetryDelay, "maxSize": o.MaxSize, "ttl": o.Ttl,
		"deadLetterQueue": o.DeadLetterQueue, "dlqAfterMaxRetries": o.DlqAfterMaxRetries,
		"delayedProcessing": o.DelayedProcessing, "windowBuffer": o.WindowBuffer,
		"retentionSeconds": o.RetentionSeconds, "completedRetentionSeconds": o.CompletedRetentionSeconds,
		"retentionEnabled": o.RetentionEnabled, "encryptionEnabled": o.EncryptionEnabled,
		"maxWaitTimeSeconds": o.MaxWaitTimeSeconds,
	}
}
