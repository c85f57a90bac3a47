package command

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Consumer groups the broker reserves.
const (
	// QueueModeGroup is the group of a pop or ack that names none (spec §2).
	// A client may name it; the state stores it under this name.
	QueueModeGroup = "__QUEUE_MODE__"
	// TimerDLQGroup is the group a timer that could never fire is
	// dead-lettered under (addendum §1.5).
	TimerDLQGroup = "__timer__"
)

// Text is the value as clients read it: the enum's name in lower case.
func (s AckStatus) Text() string { return enumText(s) }

// Text is the reason as clients read it; "" for NONE.
func (r Reason) Text() string {
	if r == Reason_NONE {
		return ""
	}
	return enumText(r)
}

// Text is the status as clients read it.
func (s TimerResult_Status) Text() string { return enumText(s) }

// Text is the result type as clients read it.
func (t TxnItemResult_Type) Text() string { return enumText(t) }

// Text is the status as clients read it.
func (s PushItemResult_Status) Text() string { return enumText(s) }

// Text is the reason as clients read it; "" for APPLIED.
func (r KVResult_Reason) Text() string {
	if r == KVResult_APPLIED {
		return ""
	}
	return enumText(r)
}

func enumText(e protoreflect.Enum) string {
	v := e.Descriptor().Values().ByNumber(e.Number())
	if v == nil {
		return "unknown"
	}
	return strings.ToLower(string(v.Name()))
}

// IsWrite reports whether a KV op changes state.
func (k KVOp_Kind) IsWrite() bool {
	switch k {
	case KVOp_PUT, KVOp_PUT_IF_ABSENT, KVOp_CAS, KVOp_DELETE, KVOp_INCR:
		return true
	}
	return false
}

// Gates reports whether a KV op can refuse, and so roll back its call or
// transaction when it is required.
func (k KVOp_Kind) Gates() bool { return k.IsWrite() || k == KVOp_CHECK }

// NeedsExpiry reports whether a KV op stores a value and so must say when
// it expires.
func (k KVOp_Kind) NeedsExpiry() bool {
	switch k {
	case KVOp_PUT, KVOp_PUT_IF_ABSENT, KVOp_CAS, KVOp_INCR:
		return true
	}
	return false
}
