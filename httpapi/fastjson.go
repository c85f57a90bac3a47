package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/command"
)

// The two answers on the hot path (a push's results, a pop's messages) are
// written by hand: encoding/json would walk them by reflection and re-scan
// every stored payload, which is already JSON. The shapes are the ones the
// spec gives (§4.2, §4.3); fastjson_test.go decodes them back and checks every
// member.

func writeRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func appendString(b []byte, s string) []byte {
	out, _ := jsontext.AppendQuote(b, s) // invalid UTF-8 comes out as U+FFFD
	return out
}

func appendUUID(b []byte, id []byte) []byte {
	if len(id) != 16 {
		return append(b, "null"...)
	}
	var buf [36]byte
	encodeUUID(buf[:], id)
	b = append(b, '"')
	b = append(b, buf[:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

func encodeUUID(dst, id []byte) {
	j := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j], dst[j+1] = hexDigits[c>>4], hexDigits[c&0xf]
		j += 2
	}
}

// appendMicros writes µs since the epoch as isoMicros does.
func appendMicros(b []byte, us int64) []byte {
	return time.UnixMicro(us).UTC().AppendFormat(b, microsLayout)
}

func appendNullableString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendPushResults writes a push's answer: a top-level array, one object
// per item, with the ids in both spellings the clients read (spec §4.2).
func appendPushResults(b []byte, pr *command.PushResult) []byte {
	b = append(b, '[')
	for i, r := range pr.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"status":`...)
		b = appendString(b, r.Status.Text())
		b = append(b, `,"transaction_id":`...)
		b = appendString(b, r.TransactionId)
		b = append(b, `,"transactionId":`...)
		b = appendString(b, r.TransactionId)
		b = append(b, `,"message_id":`...)
		b = appendUUID(b, r.MessageId)
		b = append(b, `,"messageId":`...)
		b = appendUUID(b, r.MessageId)
		b = append(b, `,"partition_id":`...)
		b = appendUUID(b, r.PartitionId)
		b = append(b, `,"partitionId":`...)
		b = appendUUID(b, r.PartitionId)
		b = append(b, `,"trace_id":`...)
		b = appendNullableString(b, r.TraceId)
		b = append(b, `,"queueName":`...)
		b = appendString(b, r.Queue)
		if r.Offset > 0 {
			b = append(b, `,"offset":`...)
			b = strconv.AppendUint(b, r.Offset, 10)
		}
		if r.Status == command.PushItemResult_FAILED {
			b = append(b, `,"error":`...)
			b = appendString(b, r.Error)
		}
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}

// appendPopResult writes a pop's answer (spec §4.3): the lease, and every
// message with its stored payload as it was pushed.
func appendPopResult(b []byte, res *command.PopResult) []byte {
	first := res.Messages[0]
	b = append(b, `{"success":true,"queue":`...)
	b = appendString(b, res.Queue)
	b = append(b, `,"partition":`...)
	b = appendString(b, first.Partition)
	b = append(b, `,"partitionId":`...)
	b = appendUUID(b, first.PartitionId)
	b = append(b, `,"leaseId":`...)
	b = appendString(b, res.LeaseId)
	b = append(b, `,"consumerGroup":`...)
	b = appendString(b, res.ConsumerGroup)
	b = append(b, `,"partitionsClaimed":`...)
	b = strconv.AppendUint(b, uint64(res.PartitionsClaimed), 10)
	if res.LeaseExpiresUs > 0 {
		b = append(b, `,"leaseExpiresAt":"`...)
		b = appendMicros(b, res.LeaseExpiresUs)
		b = append(b, '"')
	}
	b = appendConflation(b, res)
	b = append(b, `,"messages":[`...)
	for i, m := range res.Messages {
		rec := res.Records[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendUUID(b, rec.Id)
		b = append(b, `,"transactionId":`...)
		b = appendString(b, rec.TransactionId)
		b = append(b, `,"traceId":`...)
		b = appendNullableString(b, rec.TraceId)
		b = append(b, `,"data":`...)
		if len(rec.Payload) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, rec.Payload...) // stored as the client pushed it: JSON text
		}
		b = append(b, `,"producerSub":`...)
		b = appendNullableString(b, rec.ProducerSub)
		b = append(b, `,"createdAt":"`...)
		b = appendMicros(b, rec.CreatedUs)
		b = append(b, `","queue":`...)
		b = appendString(b, m.Queue)
		b = append(b, `,"partition":`...)
		b = appendString(b, m.Partition)
		b = append(b, `,"partitionId":`...)
		b = appendUUID(b, m.PartitionId)
		b = append(b, `,"leaseId":`...)
		b = appendString(b, res.LeaseId)
		b = append(b, `,"consumerGroup":`...)
		b = appendString(b, res.ConsumerGroup)
		b = append(b, `,"retryCount":`...)
		b = strconv.AppendUint(b, uint64(m.RetryCount), 10)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// appendConflation writes the conflation echo of a pop (addendum §8) when
// there is one.
func appendConflation(b []byte, res *command.PopResult) []byte {
	if !res.ConflationEcho {
		return b
	}
	b = append(b, `,"conflation":`...)
	b = strconv.AppendBool(b, res.Conflation)
	if res.ConflationConflict {
		b = append(b, `,"conflationConflict":true`...)
	}
	return b
}
