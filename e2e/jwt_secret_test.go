package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A node given an HMAC secret shorter than HS256 takes refuses to start,
// naming the rule and the length it got, instead of starting and then
// answering every token with 401 (issue 21; RFC 7518 §3.2). The same for
// an oct key of a JWKS file, named by its kid.
func TestAShortJWTSecretRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	jwks := dir + "/jwks.json"
	os.WriteFile(jwks, []byte(`{"keys":[{"kty":"oct","kid":"team-a","k":"c2hvcnQ","alg":"HS256"}]}`), 0o600)
	for _, c := range []struct {
		what string
		env  []string
		want []string
	}{
		{"JWT_SECRET of 6 bytes", []string{"JWT_ENABLED=true", "JWT_SECRET=s3cret"},
			[]string{"JWT_SECRET is 6 bytes", "at least 32 bytes", "RFC 7518"}},
		{"a JWKS file with a 5-byte oct key", []string{"JWT_ENABLED=true", "JWT_JWKS_FILE=" + jwks},
			[]string{`"team-a"`, "5 bytes", "RFC 7518"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binPath, "--node-id", "short", "--data-dir", t.TempDir(),
			"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Fatalf("%s: the node did not refuse to start (err %v):\n%s", c.what, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: the exit does not say %q:\n%s", c.what, w, out)
			}
		}
	}
}
