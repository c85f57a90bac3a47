package httpapi

import (
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
)

// A queue's options in JSON, by the spec's names (§4.1): whole where
// configure echoes them and a queue's detail shows them, a few of them
// where a view shows only those.

// optionsOut is every option of a queue, as stored.
func optionsOut(o *command.QueueOptions) map[string]any {
	return map[string]any{
		"priority": o.GetPriority(), "leaseTime": o.GetLeaseTime(), "retryLimit": o.GetRetryLimit(),
		"retryDelay": o.GetRetryDelay(), "maxSize": o.GetMaxSize(), "ttl": o.GetTtl(),
		"deadLetterQueue": o.GetDeadLetterQueue(), "dlqAfterMaxRetries": o.GetDlqAfterMaxRetries(),
		"delayedProcessing": o.GetDelayedProcessing(), "windowBuffer": o.GetWindowBuffer(),
		"retentionSeconds": o.GetRetentionSeconds(), "completedRetentionSeconds": o.GetCompletedRetentionSeconds(),
		"retentionEnabled": o.GetRetentionEnabled(), "encryptionEnabled": o.GetEncryptionEnabled(),
		"maxWaitTimeSeconds": o.GetMaxWaitTimeSeconds(), "dedupWindowSeconds": queue.DedupWindowUs(o) / 1e6,
		"retryBackoff": o.GetRetryBackoff(), "retryDelayMax": o.GetRetryDelayMax(), "conflation": nullableBool(o.Conflation),
	}
}

// The options the views that show a few of them show.
var (
	// statusConfigOptions: the config of GET /status/queues/:queue (§4.12).
	statusConfigOptions = []string{"leaseTime", "retryLimit", "retryDelay", "ttl", "maxQueueSize", "deadLetterQueue"}
	// messageConfigOptions: the queueConfig of GET /messages/:partitionId/:transactionId (§4.9).
	messageConfigOptions = []string{"leaseTime", "retryLimit", "retryDelay", "ttl", "priority"}
)

// optionAliases are the names a view gives an option that optionsOut
// names otherwise: the status page's "maxQueueSize" is Queen's dashboard's
// name for maxSize.
var optionAliases = map[string]string{"maxQueueSize": "maxSize"}

// optionsPick is the named options of optionsOut (or their aliases).
func optionsPick(o *command.QueueOptions, names ...string) map[string]any {
	all := optionsOut(o)
	out := make(map[string]any, len(names))
	for _, name := range names {
		key := name
		if alias, ok := optionAliases[name]; ok {
			key = alias
		}
		out[name] = all[key]
	}
	return out
}

// nullableBool is an optional option: null when it was never set.
func nullableBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
