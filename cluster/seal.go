package cluster

import (
	"fmt"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// seal encrypts, on the leader and before the entry is encoded, the
// payloads of cmd bound for a queue that encrypts at rest (spec §5.12,
// package atrest): the Raft log, the message files, the state file and
// every snapshot then hold ciphertext. Whether a queue encrypts is read
// from this leader's state; a configure racing a push decides nothing for
// the messages proposed before it applies (each payload says whether it is
// sealed, so both kinds are read back right).
func (n *Node) seal(cmd *command.Command) error {
	keys := n.cfg.Keys
	if keys == nil {
		return nil
	}
	each := func(push func(*command.PushItem), timer func(*command.TimerOp)) { fsm.EachPayload(cmd, push, timer) }
	carries := false
	each(func(*command.PushItem) { carries = true }, func(*command.TimerOp) { carries = true })
	if !carries {
		return nil
	}
	return n.fsm.ReadAs(cmd.Tenant, func(r *fsm.Reader) error {
		var last string
		var lastEncrypts bool
		keys.SealPayloads(each, func(queue string) bool {
			if queue != last || last == "" { // a command's items mostly share one queue
				rec := r.Queue(queue)
				last, lastEncrypts = queue, rec != nil && rec.GetOptions().GetEncryptionEnabled()
			}
			return lastEncrypts
		})
		return nil
	})
}

// checkKeys refuses to start a node whose key file lacks a key that its
// state's payloads were sealed with: it would serve errors where it should
// serve messages (and never ciphertext).
func checkKeys(keys *atrest.Keyring, needed []string) error {
	missing := keys.Missing(needed)
	switch {
	case len(missing) == 0:
		return nil
	case keys == nil:
		return fmt.Errorf("cluster: the data holds payloads encrypted with the keys %q; start with --encryption-keys naming them", missing)
	default:
		return fmt.Errorf("cluster: the data holds payloads encrypted with the keys %q, which the key file lacks (keep every key that sealed data in the file)", missing)
	}
}
