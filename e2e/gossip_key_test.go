package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

func keyFile(t *testing.T, dir, name string) string {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("# gossip key\n"+base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Gossip encrypted with a keyring: three nodes that share the key form a
// cluster; a fourth with another key is never seen, so it never becomes a
// voter.
func TestGossipKeyringKeepsOutANodeWithAnotherKey(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	dir := t.TempDir()
	good, other := keyFile(t, dir, "good.keys"), keyFile(t, dir, "other.keys")
	c := startCluster(t, nodeOpts{Extra: []string{"--gossip-keyring", good},
		Node: func(i int, s *nodeproc.Spec) error {
			if i == 4 {
				s.Flags = append(s.Flags, "--gossip-keyring", other)
			}
			return nil
		}})
	l := c.leader(20 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	stranger, err := c.AddNode(ctx)
	if err == nil {
		t.Fatal("a node with another gossip key joined")
	}
	if stranger != nil {
		defer stranger.Kill()
	}
	v, err := l.ClusterView(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Nodes {
		if n.ID == "n4" && n.Voter {
			t.Fatalf("n4 became a voter: %+v", v.Nodes)
		}
	}
	if len(v.Nodes) != 3 {
		t.Fatalf("the cluster sees %d nodes, want the 3 that share the key: %+v", len(v.Nodes), v.Nodes)
	}
}
