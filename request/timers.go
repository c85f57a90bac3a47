package request

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/queen-node/queen-node/command"
)

// TimerOp is one timer op as a front end decoded it (addendum §1.2).
type TimerOp struct {
	Op           string // schedule | reschedule | cancel
	Queue        string
	TimerKey     string
	Partition    string
	HasPartition bool
	DelayMs      float64
	HasDelay     bool
	Txn          string
	Payload      []byte // the message body's bytes, decoded from the wire's base64
	PayloadZstd  bool   // Payload is zstd-compressed
	Encrypted    bool
	// Fields are the names of every member the op was sent with, so that a
	// server-owned one is refused rather than ignored (empty over gRPC,
	// whose messages cannot carry them).
	Fields []string
}

// serverOwnedTimerFields may never come from a client (addendum §1.2).
var serverOwnedTimerFields = map[string]bool{
	"producerSub": true, "producer_sub": true, "messageId": true, "message_id": true,
	"tenant": true, "tenantId": true, "tenant_id": true, "deliverAt": true, "deliver_at": true,
	"delaySeconds": true, "delay_seconds": true, "attempts": true, "claimToken": true,
	"claim_token": true, "claimedUntil": true,
}

var timerKinds = map[string]command.TimerOp_Kind{
	"schedule": command.TimerOp_SCHEDULE, "reschedule": command.TimerOp_RESCHEDULE, "cancel": command.TimerOp_CANCEL,
}

// TimerBatch validates POST /api/v1/timers: at least one op, within the
// standalone route's limits.
func TimerBatch(ops []TimerOp) ([]*command.TimerOp, error) {
	if len(ops) == 0 {
		return nil, TimersBad("timers_bad_request", "operations must not be empty")
	}
	return TimerOps(ops, true)
}

// TimerOps validates a call's timer ops, all before any is applied: one op
// per (queue, timerKey). standalone applies the standalone route's limits,
// which a transaction's timers array does not have.
func TimerOps(in []TimerOp, standalone bool) ([]*command.TimerOp, error) {
	if standalone && len(in) > MaxTimerOpsPerCall {
		return nil, TimersBad("timers_too_many_ops", fmt.Sprintf("at most %d ops per call", MaxTimerOpsPerCall))
	}
	seen := map[string]bool{}
	ops := make([]*command.TimerOp, 0, len(in))
	for i := range in {
		op, err := timerOp(i, &in[i], standalone)
		if err != nil {
			return nil, err
		}
		k := op.Queue + "\x00" + op.TimerKey
		if seen[k] {
			return nil, TimersBad("timers_bad_request", fmt.Sprintf("op at index %d: (%s, %s) appears twice in one call", i, op.Queue, op.TimerKey))
		}
		seen[k] = true
		ops = append(ops, op)
	}
	return ops, nil
}

// TimerCancel validates DELETE /api/v1/timers/:queue/*timerKey.
func TimerCancel(queue, key, txn string) (*command.TimerOp, error) {
	if queue == "" || key == "" || CheckName("queue", queue) != nil || CheckName("timerKey", key) != nil {
		return nil, TimersBad("timers_bad_request", "queue and timerKey must be non-empty names")
	}
	return &command.TimerOp{Kind: command.TimerOp_CANCEL, Queue: queue, TimerKey: key, Txn: txn}, nil
}

// TimerCountPrefix validates the prefix of a timer count (addendum §2).
func TimerCountPrefix(prefix string) error {
	switch {
	case prefix == "":
		return TimersBad("timers_count_prefix_required", "mode=count needs a non-empty prefix")
	case strings.IndexByte(prefix, 0) >= 0:
		return TimersBad("timers_count_prefix_invalid", "prefix must not contain NUL")
	case len(prefix) > MaxTimerCountPrefix:
		return TimersBad("timers_count_prefix_too_long", "prefix is longer than 128 bytes")
	}
	return nil
}

// TimerListLimit is a timer list's page size: the default for <= 0, at
// most MaxTimerListLimit.
func TimerListLimit(limit int64) int {
	if limit <= 0 {
		return DefaultTimerList
	}
	return int(min(limit, MaxTimerListLimit))
}

func timerOp(i int, in *TimerOp, standalone bool) (*command.TimerOp, error) {
	at := OpAt(i)
	for _, k := range in.Fields {
		if serverOwnedTimerFields[k] || strings.HasPrefix(k, "_") {
			return nil, &Error{Kind: Invalid, Msg: "timers_server_owned_field", Reason: "timers_server_owned_field",
				Detail: at + k + " is set by the server"}
		}
	}
	kind, ok := timerKinds[in.Op]
	if !ok {
		return nil, TimersBad("timers_bad_op", at+`op must be "schedule", "reschedule" or "cancel"`)
	}
	op := &command.TimerOp{Kind: kind, Queue: in.Queue, TimerKey: in.TimerKey, Encrypted: in.Encrypted}
	if op.Queue == "" {
		return nil, TimersBad("timers_bad_queue", at+"queue must be a non-empty string")
	}
	if err := CheckName("queue", op.Queue); err != nil {
		return nil, TimersBad("timers_bad_queue", at+err.Error())
	}
	if op.TimerKey == "" {
		return nil, TimersBad("timers_bad_key", at+"timerKey must be a non-empty string")
	}
	if err := CheckName("timerKey", op.TimerKey); err != nil {
		return nil, TimersBad("timers_bad_key", at+err.Error())
	}
	if in.HasPartition {
		if in.Partition == "" {
			return nil, TimersBad("timers_bad_partition", at+"partition must be a non-empty string when present")
		}
		if err := CheckName("partition", in.Partition); err != nil {
			return nil, TimersBad("timers_bad_partition", at+err.Error())
		}
		op.Partition = in.Partition
	}
	if kind == command.TimerOp_CANCEL {
		op.Txn = in.Txn
		return op, nil
	}
	ms := in.DelayMs
	if !in.HasDelay {
		return nil, TimersBad("timers_delay_required", at+"a schedule needs delayMs (a number of milliseconds)")
	}
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return nil, TimersBad("timers_bad_delay", at+"delayMs must be a number of milliseconds")
	}
	if standalone && ms > MaxTimerHorizonMs {
		return nil, &Error{Kind: Refused, Msg: "timer_horizon_exceeded", Detail: at + "delayMs is beyond the 90-day horizon"}
	}
	if ms > MaxSeconds*1000 {
		return nil, TimersBad("timers_bad_delay", at+"delayMs is too large")
	}
	op.DelayUs = int64(math.Round(ms * 1000))
	if in.Txn == "" || len(in.Txn) > MaxTimerTxnBytes {
		return nil, TimersBad("timers_bad_txn", at+"txn must be a non-empty string of at most 65535 bytes")
	}
	op.Txn = in.Txn
	body := in.Payload
	if in.PayloadZstd {
		var err error
		if body, err = zstdDecoder.DecodeAll(body, nil); err != nil {
			return nil, TimersBad("timers_bad_payload", at+"payload does not decompress: "+err.Error())
		}
	}
	if standalone && len(body) > MaxTimerPayload {
		return nil, &Error{Kind: TooLarge, Msg: "payload_too_large", Detail: at + "the decoded payload is larger than 1 MiB"}
	}
	// Messages carry JSON; a body that is not JSON travels wrapped.
	if !json.Valid(body) {
		body, _ = json.Marshal(map[string]string{"_raw_b64": base64.StdEncoding.EncodeToString(body)})
	}
	op.Payload = body
	op.MessageId = NewMessageID()
	return op, nil
}

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(64<<20))
