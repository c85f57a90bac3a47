package failpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/queen-node/queen-node/jepsen/harness"
)

// corruptKinds are the files corrupt damages, by the name it reports:
// the message segments and their indexes (CRC-32C per record and entry),
// the Raft log's segments (a CRC-32C per command entry, and the check at
// open that the log still reaches what the state file holds), the state
// file (state checks compare its digest with the other replicas') and the
// snapshots (raft's CRC-64 of the whole file, and the message files
// inside).
var corruptKinds = []struct {
	name    string
	pattern string // under the data dir
}{
	{"segment", "messages/*/*.log"},
	{"index", "messages/*/*.index"},
	{"raft-log", "raft/wal/*.wal"},
	{"state", "fsm.db"},
	{"snapshot", "raft/snapshots/*/state.bin"},
}

type corrupt struct{}

func (corrupt) Name() string                    { return "corrupt" }
func (corrupt) Available(*harness.Cluster) bool { return true }

// Inject stops a node (the leader half the time) with SIGTERM, flips one
// bit of, or cuts the tail off, one of its files of a kind picked at
// random, and starts it again, as a disk's silent errors would leave it:
// the node must find the damage where it reads it and never serve it (the
// queue checker holds every delivered payload against the one pushed). The
// heal waits for the node to rebuild itself from the others (cluster/
// resync.go): every node healthy again. Damage that stops the node from
// starting at all (a state file whose pages bbolt cannot open) takes the
// operator's procedure instead: remove it from the cluster, and a new node
// joins empty.
func (corrupt) Inject(ctx context.Context, c *harness.Cluster, rng *rand.Rand) (func(context.Context) error, string, error) {
	n, who := target(ctx, c, rng)
	if n == nil {
		return nil, "", fmt.Errorf("no node to damage")
	}
	if _, _, err := n.Terminate(30 * time.Second); err != nil {
		return nil, "", err
	}
	what, err := damageOneFile(n.DataDir(), rng)
	if rerr := c.Restart(n); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, "", err
	}
	heal := func(ctx context.Context) error {
		if err := c.Healthy(ctx, 60*time.Second); err == nil || n.Running() {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := c.RemoveNode(ctx, n); err != nil {
			return fmt.Errorf("remove the damaged %s, which does not start: %w", n.ID(), err)
		}
		_, err := c.AddNode(ctx)
		return err
	}
	return heal, fmt.Sprintf("damage %s's files: %s; it rebuilds itself", who, what), nil
}

// damageOneFile damages one file under dir of a kind picked at random among
// those dir holds, and says what it did.
func damageOneFile(dir string, rng *rand.Rand) (string, error) {
	type candidate struct{ kind, path string }
	var cands []candidate
	for _, k := range corruptKinds {
		paths, _ := filepath.Glob(filepath.Join(dir, k.pattern))
		for _, p := range paths {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				cands = append(cands, candidate{k.name, p})
			}
		}
	}
	if len(cands) == 0 {
		return "no file to damage yet", nil
	}
	// A kind first, then one of its files: every kind is tried as often,
	// however many files each has.
	byKind := map[string][]string{}
	var kinds []string
	for _, c := range cands {
		if byKind[c.kind] == nil {
			kinds = append(kinds, c.kind)
		}
		byKind[c.kind] = append(byKind[c.kind], c.path)
	}
	kind := kinds[rng.Intn(len(kinds))]
	path := byKind[kind][rng.Intn(len(byKind[kind]))]
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	rel, _ := filepath.Rel(dir, path)
	if rng.Intn(3) == 0 && len(b) > 1 {
		cut := 1 + rng.Intn(min(len(b)-1, 4096))
		if err := os.Truncate(path, int64(len(b)-cut)); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s: the last %d bytes cut off", kind, rel, cut), nil
	}
	off := rng.Intn(len(b))
	bit := byte(1) << rng.Intn(8)
	b[off] ^= bit
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: bit %#02x of byte %d flipped", kind, rel, bit, off), nil
}
