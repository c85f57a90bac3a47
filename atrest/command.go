package atrest

import "github.com/queen-node/queen-node/command"

// Payloads visits the payloads of a command that reach a queue: push is
// called for every message it appends, timer for every timer it schedules
// (its kind's fsm.Kind.Payloads knows which those are).
type Payloads func(push func(*command.PushItem), timer func(*command.TimerOp))

// SealPayloads seals, in place, every payload bound for a queue that
// encrypts at rest (encrypts(queue)), under the newest key, and reports
// whether it sealed any. A timer it seals is marked encrypted (the broker
// owns that flag); a timer its client marked encrypted is left alone
// (apply refuses it when its queue encrypts: timers.Conflict). A payload
// sealed already is left as it is, so a proposal retried on another
// leader is not sealed twice. A nil Keyring seals nothing.
func (k *Keyring) SealPayloads(each Payloads, encrypts func(queue string) bool) bool {
	if k == nil {
		return false
	}
	sealed := false
	each(
		func(it *command.PushItem) {
			if !Sealed(it.Payload) && encrypts(it.Queue) {
				it.Payload, sealed = k.Seal(it.Payload), true
			}
		},
		func(op *command.TimerOp) {
			if !op.Encrypted && encrypts(op.Queue) {
				op.Payload, op.Encrypted, sealed = k.Seal(op.Payload), true, true
			}
		})
	return sealed
}

// NoteKeys adds to names (in place, in the order first met) the key of
// every sealed payload, and returns the names it added.
func NoteKeys(each Payloads, names *[]string) []string {
	var added []string
	note := func(b []byte) {
		if len(b) == 0 || b[0] != magic[0] {
			return // plaintext JSON: the common case, one byte looked at
		}
		name, ok := KeyOf(b)
		if !ok {
			return
		}
		for _, n := range *names {
			if n == name {
				return
			}
		}
		*names = append(*names, name)
		added = append(added, name)
	}
	each(func(it *command.PushItem) { note(it.Payload) }, func(op *command.TimerOp) { note(op.Payload) })
	return added
}
