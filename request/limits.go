package request

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the API [ours unless the spec names them]. Names are joined
// with 0x00 in the state's keys, so a NUL is refused in every name.
const (
	MaxNameBytes  = 512
	MaxTxnIDBytes = 1024
	// MaxSeconds bounds every duration given in seconds (about 100 years),
	// so that µs arithmetic on entry times can never overflow.
	MaxSeconds = 100 * 365 * 24 * 3600

	MaxPopBatch      = 10000
	MaxPopPartitions = 1000
	MaxPopWait       = 10 * time.Minute
	DefaultPopWait   = 30 * time.Second

	DefaultExtendSeconds = 60
	MaxExtendSeconds     = 7 * 24 * 3600

	// KV (spec §4.7, addendum §4.10).
	MaxKVValueBytes    = 64 << 10
	MaxKVKeyBytes      = 512
	MaxKVOpsPerCall    = 256
	MaxKVKeysPerOp     = 1024
	DefaultPrefixLimit = 100
	MaxPrefixLimit     = 1000

	// Timers: the standalone route's limits (addendum §2); the transaction
	// array has none of these beyond the body limit.
	MaxTimerOpsPerCall  = 256
	MaxTimerHorizonMs   = 90 * 24 * 3600 * 1000
	MaxTimerPayload     = 1 << 20
	MaxTimerTxnBytes    = 65535
	MaxTimerListLimit   = 1000
	DefaultTimerList    = 100
	MaxTimerCountPrefix = 128

	// Positions in a transaction (addendum §4.2).
	MaxPositionsPerCall = 16384
	MaxPositionMetadata = 4096
)

// CheckName refuses a name the state cannot key.
func CheckName(what, s string) error {
	if len(s) > MaxNameBytes {
		return &Error{Kind: TooLarge, Msg: what + " is too long (max " + strconv.Itoa(MaxNameBytes) + " bytes)", Code: codeNameTooLong}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Bad(what + " must not contain NUL characters")
	}
	if !utf8.ValidString(s) {
		return Bad(what + " must be valid UTF-8")
	}
	return nil
}

// The codes of the limits a transaction answers as verdicts (addendum
// §4.5) and other routes as 413 or 400 (addendum §4.9).
const (
	codeNameTooLong   = "name_too_long"
	codeKVKeyTooLarge = "kv_key_too_large"
	codeTooLarge      = "too_large"
)

// keyable reports whether every name can be keyed.
func keyable(names ...string) bool {
	for _, n := range names {
		if CheckName("", n) != nil {
			return false
		}
	}
	return true
}
