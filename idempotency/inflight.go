package idempotency

import "sync"

// InFlight is the set of keys whose commands the leader is applying right
// now. The state machine alone would answer a second command with the same
// key as a replay once the first is applied; InFlight turns the race of two
// concurrent requests into the 409 a client expects, and spares the log the
// second entry.
type InFlight struct {
	keys sync.Map
}

// Begin claims key for one command; done releases it. ErrInFlight when a
// command with key is already being applied. An empty key claims nothing.
func (f *InFlight) Begin(key string) (done func(), err error) {
	if key == "" {
		return func() {}, nil
	}
	if _, busy := f.keys.LoadOrStore(key, struct{}{}); busy {
		return nil, ErrInFlight
	}
	return func() { f.keys.Delete(key) }, nil
}
