package grpcapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
)

// Requests in, commands out: every public request is checked here with the
// HTTP API's rules (httpapi/push.go, pop.go, ack.go, lease.go,
// configure.go) and turned into the state machine's command. httpapi's
// parsers work on raw JSON members, where type checks and value checks are
// interleaved, so the rules are restated here over typed fields, with the
// same limits and texts; parity_test.go sends the same bad requests through
// both front ends. A refusal is an invalidError: nothing is applied.

// Input limits, as httpapi's.
const (
	maxNameBytes  = 512
	maxTxnIDBytes = 1024
	maxPopBatch   = 10000
	maxPopParts   = 1000
	maxPopWait    = 10 * time.Minute
	defaultWait   = 30 * time.Second
	maxSeconds    = 100 * 365 * 24 * 3600 // every duration in seconds: about 100 years
	defaultExtend = 60
	maxExtend     = 7 * 24 * 3600
)

// checkName refuses names the state cannot key.
func checkName(what, s string) error {
	if len(s) > maxNameBytes {
		return invalid(what + " is too long (max " + strconv.Itoa(maxNameBytes) + " bytes)")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(what + " must not contain NUL characters")
	}
	if !utf8.ValidString(s) {
		return invalid(what + " must be valid UTF-8")
	}
	return nil
}

// jsonText is a payload or KV value: empty means null; anything else must
// be one JSON value.
func jsonText(what string, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(b) {
		return nil, invalid(what + " must be valid JSON text")
	}
	return b, nil
}

// pushItem validates one push item (spec §4.2, in the HTTP API's order)
// and mints its message id, and its transactionId when none was given.
func pushItem(at string, in *queenpb.PushItem) (*fsmpb.PushItem, error) {
	if in == nil {
		return nil, invalid(at + "must be set")
	}
	if err := checkName(at+"queue", in.Queue); err != nil {
		return nil, err
	}
	it := &fsmpb.PushItem{Queue: in.Queue, Partition: "Default", TransactionId: in.TransactionId, TraceId: in.TraceId}
	if in.Partition != "" {
		if err := checkName(at+"partition", in.Partition); err != nil {
			return nil, err
		}
		it.Partition = in.Partition
	}
	if len(in.TransactionId) > maxTxnIDBytes {
		return nil, invalid(at + "transaction_id is too long")
	}
	if in.TraceId != "" {
		if _, err := uuid.Parse(in.TraceId); err != nil || len(in.TraceId) != 36 {
			return nil, invalid(at + "trace_id must be a UUID")
		}
	}
	payload, err := jsonText(at+"payload", in.Payload)
	if err != nil {
		return nil, err
	}
	it.Payload = payload
	mid, err := uuid.NewV7()
	if err != nil {
		mid = uuid.New()
	}
	it.MessageId = mid[:]
	if it.TransactionId == "" {
		it.TransactionId = uuid.NewString()
	}
	return it, nil
}

func pushItems(items []*queenpb.PushItem) ([]*fsmpb.PushItem, error) {
	out := make([]*fsmpb.PushItem, 0, len(items))
	for i, in := range items {
		it, err := pushItem("items["+strconv.Itoa(i)+"].", in)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// popRequest turns a pop into its command (spec §4.3). Out-of-range
// numbers fall back or clamp as the HTTP query does; a name no queue can
// have gives match=false (an empty answer, the HTTP 204). Naming no queue
// at all is refused: the HTTP routes need one in the path.
func (s *Public) popRequest(in *queenpb.PopRequest) (pop *fsmpb.Pop, wait time.Duration, match bool, err error) {
	if in == nil {
		return nil, 0, false, invalid("pop must be set")
	}
	switch {
	case in.Queue == "" && in.Namespace == "":
		return nil, 0, false, invalid("queue (or namespace) is required")
	case in.Queue != "" && in.Namespace != "":
		return nil, 0, false, invalid("set queue or namespace, not both")
	}
	pop = &fsmpb.Pop{
		Queue: in.Queue, ConsumerGroup: in.ConsumerGroup, Namespace: in.Namespace, Task: in.Task,
		Batch: min(max(in.Batch, 1), maxPopBatch), Partitions: min(max(in.Partitions, 1), maxPopParts),
		AutoAck: in.AutoAck,
	}
	if pop.ConsumerGroup == fsm.QueueModeGroup {
		pop.ConsumerGroup = ""
	}
	if in.Partition != "" && in.Queue != "" {
		pop.Partition, pop.HasPartition, pop.Partitions = in.Partition, true, 1
	}
	if in.LeaseSeconds > 0 {
		pop.LeaseSeconds = min(in.LeaseSeconds, maxSeconds)
	}
	switch {
	case in.SubscriptionFrom != nil:
		pop.Subscription, pop.SubscriptionFromUs = fsmpb.Pop_FROM, in.SubscriptionFrom.AsTime().UnixMicro()
	case in.SubscriptionMode == queenpb.SubscriptionMode_SUBSCRIPTION_MODE_NEW:
		pop.Subscription = fsmpb.Pop_NEW
	case in.SubscriptionMode == queenpb.SubscriptionMode_SUBSCRIPTION_MODE_UNSPECIFIED && s.opts.defaultSubscriptionMode != "all":
		pop.Subscription = fsmpb.Pop_NEW
	default:
		pop.Subscription = fsmpb.Pop_DEFAULT_ALL
	}
	wait = min(time.Duration(in.WaitMs)*time.Millisecond, maxPopWait)
	match = checkName("queue", pop.Queue) == nil && checkName("consumer_group", pop.ConsumerGroup) == nil &&
		checkName("partition", pop.Partition) == nil && checkName("namespace", pop.Namespace) == nil &&
		checkName("task", pop.Task) == nil
	return pop, wait, match, nil
}

// ackStatuses maps the public statuses to the state machine's.
var ackStatuses = map[queenpb.AckStatus]string{
	queenpb.AckStatus_ACK_STATUS_UNSPECIFIED: fsm.StatusCompleted,
	queenpb.AckStatus_ACK_STATUS_COMPLETED:   fsm.StatusCompleted,
	queenpb.AckStatus_ACK_STATUS_FAILED:      fsm.StatusFailed,
	queenpb.AckStatus_ACK_STATUS_RETRY:       fsm.StatusRetry,
	queenpb.AckStatus_ACK_STATUS_DLQ:         fsm.StatusDLQ,
}

// ackFields are one ack's fields, from either request shape.
type ackFields struct {
	txn, pid, group, lease string
	status                 queenpb.AckStatus
	errText                *string
}

func fromAckRequest(a *queenpb.AckRequest) ackFields {
	if a == nil {
		return ackFields{}
	}
	return ackFields{a.TransactionId, a.PartitionId, a.ConsumerGroup, a.LeaseId, a.Status, a.Error}
}

// ackItem validates one ack (spec §4.4). known=false for a status the API
// does not know: the HTTP API answers it as a refused item, not a 400.
func ackItem(f ackFields, batch bool) (it *fsmpb.AckItem, known bool, err error) {
	if f.txn == "" {
		if batch {
			return nil, false, invalid("Each acknowledgment must have a valid transactionId string")
		}
		return nil, false, invalid("transactionId is required")
	}
	if f.pid == "" {
		if batch {
			return nil, false, invalid("Each acknowledgment must have a valid partitionId string to ensure message uniqueness")
		}
		return nil, false, invalid("partitionId is required to ensure message uniqueness")
	}
	it = &fsmpb.AckItem{TransactionId: f.txn, LeaseId: f.lease}
	if pid, err := uuid.Parse(f.pid); err == nil {
		it.PartitionId = pid[:] // a non-UUID finds nothing: "Message not found"
	}
	if err := checkName("consumer_group", f.group); err != nil {
		return nil, false, err
	}
	if f.group != fsm.QueueModeGroup {
		it.ConsumerGroup = f.group
	}
	if f.errText != nil {
		it.Error, it.HasError = *f.errText, true
	}
	it.Status, known = ackStatuses[f.status]
	return it, known, nil
}

// extendRequest validates a lease extension (spec §4.6).
func extendRequest(in *queenpb.ExtendLeaseRequest) (*fsmpb.ExtendLease, error) {
	if in.LeaseId == "" {
		return nil, invalid("lease_id is required")
	}
	secs := in.Seconds
	if secs == 0 {
		secs = defaultExtend
	}
	if secs < 0 || secs > maxExtend {
		return nil, invalid("seconds must be an integer between 1 and 604800")
	}
	return &fsmpb.ExtendLease{LeaseId: in.LeaseId, Seconds: secs}, nil
}

// configureRequest validates a configure (spec §4.1): options are sizes or
// durations (never negative, at most about 100 years), except priority.
func configureRequest(in *queenpb.ConfigureRequest) (*fsmpb.Configure, error) {
	if err := checkName("queue", in.Queue); err != nil {
		return nil, err
	}
	out := &fsmpb.Configure{Queue: in.Queue, Options: &fsmpb.QueueOptions{}}
	if in.Namespace != nil {
		out.Namespace, out.HasNamespace = *in.Namespace, true
	}
	if in.Task != nil {
		out.Task, out.HasTask = *in.Task, true
	}
	o := in.Options
	if o == nil {
		return out, nil
	}
	ints := []struct {
		name  string
		v     *int64
		dst   **int64
		limit int64
	}{
		{"lease_time", o.LeaseTime, &out.Options.LeaseTime, maxSeconds},
		{"retry_limit", o.RetryLimit, &out.Options.RetryLimit, maxSeconds},
		{"retry_delay", o.RetryDelay, &out.Options.RetryDelay, maxSeconds * 1000}, // ms
		{"max_size", o.MaxSize, &out.Options.MaxSize, maxSeconds},
		{"delayed_processing", o.DelayedProcessing, &out.Options.DelayedProcessing, maxSeconds},
		{"window_buffer", o.WindowBuffer, &out.Options.WindowBuffer, maxSeconds},
		{"priority", o.Priority, &out.Options.Priority, maxSeconds},
		{"ttl", o.Ttl, &out.Options.Ttl, maxSeconds},
		{"retention_seconds", o.RetentionSeconds, &out.Options.RetentionSeconds, maxSeconds},
		{"completed_retention_seconds", o.CompletedRetentionSeconds, &out.Options.CompletedRetentionSeconds, maxSeconds},
		{"max_wait_time_seconds", o.MaxWaitTimeSeconds, &out.Options.MaxWaitTimeSeconds, maxSeconds},
		{"dedup_window_seconds", o.DedupWindowSeconds, &out.Options.DedupWindowSeconds, maxSeconds},
	}
	for _, f := range ints {
		if f.v == nil {
			continue
		}
		n := *f.v
		if n < 0 && f.name != "priority" {
			return nil, invalid("options." + f.name + " must not be negative")
		}
		if n > f.limit || n < -f.limit {
			return nil, invalid("options." + f.name + " is too large")
		}
		*f.dst = &n
	}
	out.Options.RetentionEnabled = o.RetentionEnabled
	out.Options.DeadLetterQueue = o.DeadLetterQueue
	out.Options.DlqAfterMaxRetries = o.DlqAfterMaxRetries
	out.Options.EncryptionEnabled = o.EncryptionEnabled
	return out, nil
}
