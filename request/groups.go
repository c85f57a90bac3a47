package request

import (
	"time"

	"github.com/queen-node/queen-node/command"
)

// ParseTime reads an ISO-8601 time as the API takes it everywhere (a pop's
// subscriptionFrom, a DLQ filter, a seek, a subscription start): RFC 3339
// with or without fractions, a UTC date-time without zone, or a date. ok is
// false when s is none of these.
func ParseTime(s string) (us int64, ok bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMicro(), true
		}
	}
	return 0, false
}

// Seek validates POST .../consumer-groups/:group/queues/:queue/seek (spec
// §4.11): toEnd true, or a timestamp (toEnd wins when both are given).
func Seek(group, queue string, toEnd bool, timestamp string, hasTimestamp bool) (*command.Seek, error) {
	if err := checkGroupAndQueue(group, queue); err != nil {
		return nil, err
	}
	if toEnd {
		return &command.Seek{Group: group, Queue: queue, ToEnd: true}, nil
	}
	if !hasTimestamp {
		return nil, Bad("Must specify either 'toEnd': true or 'timestamp'")
	}
	us, ok := ParseTime(timestamp)
	if !ok {
		return nil, Bad("timestamp must be an ISO-8601 time, e.g. 2026-01-02T15:04:05.000Z")
	}
	return &command.Seek{Group: group, Queue: queue, TimestampUs: us}, nil
}

// SeekPartition validates the one-partition seek (to its end).
func SeekPartition(group, queue, partition string) (*command.Seek, error) {
	if err := checkGroupAndQueue(group, queue); err != nil {
		return nil, err
	}
	if err := CheckName("partition", partition); err != nil {
		return nil, err
	}
	return &command.Seek{Group: group, Queue: queue, Partition: partition, OnePartition: true, ToEnd: true}, nil
}

// DeleteGroup validates DELETE /api/v1/consumer-groups/:group[/queues/:queue].
func DeleteGroup(group, queue string, allQueues, deleteMetadata bool) (*command.DeleteGroup, error) {
	if err := CheckName("consumer group", group); err != nil {
		return nil, err
	}
	if !allQueues {
		if err := CheckName("queue", queue); err != nil {
			return nil, err
		}
	}
	return &command.DeleteGroup{Group: group, Queue: queue, DeleteMetadata: deleteMetadata}, nil
}

// SetSubscription validates POST /api/v1/consumer-groups/:group/subscription.
func SetSubscription(group, timestamp string, given bool) (*command.SetSubscription, error) {
	if err := CheckName("consumer group", group); err != nil {
		return nil, err
	}
	if !given {
		return nil, Bad("Missing subscriptionTimestamp in request body")
	}
	us, ok := ParseTime(timestamp)
	if !ok {
		return nil, Bad("subscriptionTimestamp must be an ISO-8601 time, e.g. 2026-01-02T15:04:05.000Z")
	}
	return &command.SetSubscription{Group: group, FromUs: us}, nil
}

// Maintenance validates POST /api/v1/system/maintenance[/pop] (spec
// §4.14): enabled must be given as a boolean.
func Maintenance(pop bool, enabled, given bool) (*command.SetSwitches, error) {
	if !given {
		return nil, Bad("enabled (boolean) is required")
	}
	if pop {
		return &command.SetSwitches{PopMaintenance: &enabled}, nil
	}
	return &command.SetSwitches{PushMaintenance: &enabled}, nil
}

func checkGroupAndQueue(group, queue string) error {
	if err := CheckName("consumer group", group); err != nil {
		return err
	}
	return CheckName("queue", queue)
}
