package idempotency

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

// MaxKeyBytes bounds a key.
const MaxKeyBytes = 255

// Errors a front end maps to its statuses (package request does, once).
var (
	// ErrKeyTooLong: the key is longer than MaxKeyBytes (400).
	ErrKeyTooLong = errors.New("Idempotency-Key is too long (max 255 bytes)")
	// ErrKeyNotPrintable: the key has a byte outside printable ASCII (400).
	ErrKeyNotPrintable = errors.New("Idempotency-Key must be printable ASCII")
	// ErrInFlight: a command with the same key is being applied right now;
	// nothing was proposed (409).
	ErrInFlight = errors.New("a request with this Idempotency-Key is still in flight")
	// ErrKeyReused: the key was first used with a different request (422).
	ErrKeyReused = errors.New("Idempotency-Key was already used with a different request")
)

// New reads a request's key into the Idempotency its command carries; nil
// when the request has no key. operation names what is asked (an HTTP
// method and path, a gRPC method) and body is the request as sent: together
// they decide whether a retry is the same request. ttl is how long the
// outcome is kept.
func New(key, operation string, body []byte, ttl time.Duration) (*command.Idempotency, error) {
	if key == "" {
		return nil, nil
	}
	if len(key) > MaxKeyBytes {
		return nil, ErrKeyTooLong
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return nil, ErrKeyNotPrintable
		}
	}
	h := sha256.New()
	h.Write([]byte(operation))
	h.Write([]byte{'\n'})
	h.Write(body)
	return &command.Idempotency{Key: key, RequestHash: h.Sum(nil), TtlSeconds: max(int64(ttl/time.Second), 1)}, nil
}

// Refused is the command that stores a front end's refusal under idem, so
// that a retry gets the same answer. Its result is the refusal, or a Replay
// when the key already has an outcome.
func Refused(idem *command.Idempotency, r *command.Refusal) *command.Command {
	return &command.Command{Idempotency: idem,
		Body: &command.Command_IdempotencyRecord{IdempotencyRecord: &command.IdempotencyRecord{Refusal: r}}}
}

// Outcome reads apply's result for a command that carried idem. A Replay
// (the key had an outcome already) becomes that stored outcome, with
// replayed=true, or ErrKeyReused when the key came with another request.
// The outcome may be a *command.Refusal: the answer is then that 4xx.
func Outcome(idem *command.Idempotency, res proto.Message) (out proto.Message, replayed bool, err error) {
	rp, isReplay := res.(*command.Replay)
	if !isReplay {
		return res, false, nil
	}
	o := rp.GetOutcome()
	if idem == nil || !bytes.Equal(o.GetRequestHash(), idem.RequestHash) {
		return nil, false, ErrKeyReused
	}
	stored := &command.Response{}
	if err := proto.Unmarshal(o.Result, stored); err != nil {
		return nil, false, errors.New("idempotency: stored outcome does not decode: " + err.Error())
	}
	return command.Unwrap(stored), true, nil
}
