package atrest

import "github.com/queen-node/queen-node/command"

// The payloads of a command that reach a queue: pushed messages (a push,
// a transaction's pushes) and scheduled timers (the standalone batch, a
// transaction's timers). Every other command carries none.

// CarriesPayloads reports whether cmd has a payload bound for a queue.
func CarriesPayloads(cmd *command.Command) bool {
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		return len(b.Push.Items) > 0
	case *command.Command_Transaction:
		return len(b.Transaction.Ops) > 0 || len(b.Transaction.Timers) > 0
	case *command.Command_Timers:
		return len(b.Timers.Ops) > 0
	}
	return false
}

// eachPayload calls push for every pushed item and timer for every timer
// schedule of cmd.
func eachPayload(cmd *command.Command, push func(*command.PushItem), timer func(*command.TimerOp)) {
	timers := func(ops []*command.TimerOp) {
		for _, op := range ops {
			if op.Kind != command.TimerOp_CANCEL {
				timer(op)
			}
		}
	}
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		for _, it := range b.Push.Items {
			push(it)
		}
	case *command.Command_Transaction:
		for _, op := range b.Transaction.Ops {
			if p := op.GetPush(); p != nil {
				push(p)
			}
		}
		timers(b.Transaction.Timers)
	case *command.Command_Timers:
		timers(b.Timers.Ops)
	}
}

// SealCommand seals, in place, every payload of cmd bound for a queue that
// encrypts at rest (encrypts(queue)), under the newest key, and reports
// whether it sealed any. A timer it seals is marked encrypted (the broker
// owns that flag); a timer its client marked encrypted is left alone
// (apply refuses it when its queue encrypts: timers.Conflict). A payload
// sealed already is left as it is, so a proposal retried on another
// leader is not sealed twice. A nil Keyring seals nothing.
func (k *Keyring) SealCommand(cmd *command.Command, encrypts func(queue string) bool) bool {
	if k == nil {
		return false
	}
	sealed := false
	eachPayload(cmd,
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

// Encrypting reports whether any payload of cmd is bound for a queue that
// encrypts (for the one warning of a node without keys).
func Encrypting(cmd *command.Command, encrypts func(queue string) bool) bool {
	found := false
	eachPayload(cmd,
		func(it *command.PushItem) { found = found || encrypts(it.Queue) },
		func(op *command.TimerOp) { found = found || encrypts(op.Queue) })
	return found
}

// NoteKeys adds to names (in place, in the order first met) the key of
// every sealed payload of cmd, and returns the names it added.
func NoteKeys(cmd *command.Command, names *[]string) []string {
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
	eachPayload(cmd, func(it *command.PushItem) { note(it.Payload) }, func(op *command.TimerOp) { note(op.Payload) })
	return added
}
