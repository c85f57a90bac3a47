package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The script that makes the secrets docker-compose.yml and deploy/k8s mount.
const secretsScript = "gen-secrets.sh"

// secureFiles are the flags whose files make every link encrypted: the API
// pair, the peer pair and the cluster CA, the gossip keyring.
var secureFiles = []string{"tls-cert", "tls-key", "peer-tls-cert", "peer-tls-key", "peer-tls-ca", "gossip-keyring"}

// Files of the script's output that sign things and must never be mounted.
var neverMounted = []string{"ca.key", "jwt.key", "admin.jwt"}

// secretAt is the top-level secret mounted at path in service s, and its
// file as the compose file says it ("./secrets/tls.crt").
func (c compose) secretAt(s composeService, path string) (name, file string, ok bool) {
	for _, sec := range s.Secrets {
		if sec.Path() == path {
			def, ok := c.Secrets[sec.Source]
			return sec.Source, def.File, ok
		}
	}
	return "", "", false
}

// generated is where a compose secret file ("./secrets/x") is in dir, the
// script's output directory.
func generated(t *testing.T, dir, file string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(filepath.ToSlash(filepath.Clean(file)), "secrets/")
	if !ok {
		t.Fatalf("secret file %q: want it under ./secrets/, where %s writes", file, secretsScript)
	}
	return filepath.Join(dir, filepath.FromSlash(rel))
}

// TestComposeSecure: every node runs with TLS on its APIs, mutual TLS to
// the others, an encrypted gossip, JWT and --require-secure, each key a
// secret file that deploy/gen-secrets.sh makes; the health check sees the
// TLS certificate.
func TestComposeSecure(t *testing.T) {
	c := loadCompose(t)
	used := map[string]string{}
	for name, s := range c.Services {
		t.Run(name, func(t *testing.T) {
			for _, a := range s.Command {
				if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
					t.Errorf("command %q: write flags as --name=value (the tests and the health check read them that way)", a)
				}
			}
			flag := func(name string) string {
				v, ok := s.setting(name)
				if !ok || v == "" {
					t.Errorf("--%s is not set", name)
				}
				return v
			}
			if v, err := strconv.ParseBool(flag("require-secure")); err != nil || !v {
				t.Errorf("--require-secure is not true: the node would start with a link in clear text")
			}
			if v, err := strconv.ParseBool(flag("jwt-enabled")); err != nil || !v {
				t.Errorf("JWT_ENABLED is not true")
			}
			if v, ok := s.setting("jwt-secret"); ok && v != "" {
				t.Errorf("JWT_SECRET is written in the compose file; verify with JWT_PUBLIC_KEY from a secret")
			}
			files := append([]string{}, secureFiles...)
			if _, ok := s.setting("jwt-jwks-file"); ok {
				files = append(files, "jwt-jwks-file")
			} else {
				files = append(files, "jwt-public-key")
			}
			mounted := map[string]string{}
			for _, f := range files {
				path := flag(f)
				if path == "" {
					continue
				}
				secret, file, ok := c.secretAt(s, path)
				if !ok {
					t.Errorf("--%s=%s is not a secret mounted in %s", f, path, name)
					continue
				}
				mounted[f] = file
				used[secret] = name
			}
			// Its own peer pair: named after the node, shared with no other.
			for _, f := range []string{"peer-tls-cert", "peer-tls-key"} {
				if file := mounted[f]; file != "" && !strings.Contains(filepath.Base(file), name) {
					t.Errorf("--%s is %s, not %s's own", f, file, name)
				}
			}
			// The health check reads the certificate from the environment.
			if s.Environment["QUEEN_TLS_CERT"] == "" {
				t.Error("QUEEN_TLS_CERT is not in the environment: the health check would speak plain HTTP to an HTTPS port")
			} else if v, _ := s.setting("tls-cert"); v != s.Environment["QUEEN_TLS_CERT"] {
				t.Errorf("--tls-cert %q on the command line overrides QUEEN_TLS_CERT %q, which the health check pins", v, s.Environment["QUEEN_TLS_CERT"])
			}
			for _, sec := range s.Secrets {
				if _, ok := c.Secrets[sec.Source]; !ok {
					t.Errorf("secret %q is not declared under the top-level secrets", sec.Source)
				}
				used[sec.Source] = name
			}
		})
	}
	for name, def := range c.Secrets {
		if _, ok := used[name]; !ok {
			t.Errorf("secret %q is declared but no service mounts it", name)
		}
		if !strings.HasPrefix(filepath.ToSlash(filepath.Clean(def.File)), "secrets/") {
			t.Errorf("secret %q: file %q, want one under ./secrets/ (gitignored, made by %s)", name, def.File, secretsScript)
		}
		for _, never := range neverMounted {
			if filepath.Base(def.File) == never {
				t.Errorf("secret %q mounts %s, which only signs on the host", name, never)
			}
		}
	}
}

// genSecrets runs deploy/gen-secrets.sh into a new directory; args are
// added to its command line.
func genSecrets(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed, so " + secretsScript + " was NOT run (Debian: apt-get install openssl)")
	}
	dir := filepath.Join(t.TempDir(), "secrets")
	runScript(t, append([]string{"-o", dir}, args...)...)
	return dir
}

// runScript runs deploy/gen-secrets.sh with args and returns its stdout.
func runScript(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{secretsScript}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash %s %s: %v\n%s%s", secretsScript, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// tokenClaims checks tok's EdDSA signature with the public key in pubFile and
// returns its claims.
func tokenClaims(t *testing.T, tok, pubFile string) (jwt.Claims, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", pubFile)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", pubFile, err)
	}
	if _, ok := pub.(ed25519.PublicKey); !ok {
		t.Fatalf("%s: a %T, want an Ed25519 key", pubFile, pub)
	}
	parsed, err := jwt.ParseSigned(strings.TrimSpace(tok), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("token %q: %v", tok, err)
	}
	var std jwt.Claims
	var rest map[string]any
	if err := parsed.Claims(pub, &std, &rest); err != nil {
		t.Fatalf("token: signature: %v", err)
	}
	return std, rest
}

// TestSecretsScript runs deploy/gen-secrets.sh and checks its output against
// the compose file: every secret file exists; the API certificate names
// localhost, 127.0.0.1 and every service and chains to ca.crt; the peer
// pairs chain to it for both ends of a connection; the keyring holds AES
// keys; the admin token verifies with jwt.pub and carries the issuer and
// audience the nodes require. A second run leaves the secrets alone, and
// `token` mints tokens of other roles.
func TestSecretsScript(t *testing.T) {
	dir := genSecrets(t)
	c := loadCompose(t)
	for name, def := range c.Secrets {
		if _, err := os.Stat(generated(t, dir, def.File)); err != nil {
			t.Errorf("secret %s: %s made no %s: %v", name, secretsScript, def.File, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want 0700 (the keys in it are readable by the container's user)", dir, fi.Mode().Perm())
	}
	for _, never := range neverMounted {
		if fi, err := os.Stat(filepath.Join(dir, never)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", never, err)
		}
	}

	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	var svc composeService
	var names []string
	for name, s := range c.Services {
		names, svc = append(names, name), s
	}
	// One node's files, through the secrets it mounts.
	fileOf := func(s composeService, flag string) string {
		path, _ := s.setting(flag)
		_, file, ok := c.secretAt(s, path)
		if !ok {
			t.Fatalf("--%s=%s is not a mounted secret", flag, path)
		}
		return generated(t, dir, file)
	}
	pair, err := tls.LoadX509KeyPair(fileOf(svc, "tls-cert"), fileOf(svc, "tls-key"))
	if err != nil {
		t.Fatalf("the API pair: %v", err)
	}
	for _, host := range append([]string{"localhost", "127.0.0.1"}, names...) {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("tls.crt for %s: %v", host, err)
		}
	}
	for name, s := range c.Services {
		peer, err := tls.LoadX509KeyPair(fileOf(s, "peer-tls-cert"), fileOf(s, "peer-tls-key"))
		if err != nil {
			t.Fatalf("%s's peer pair: %v", name, err)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
			if _, err := peer.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s's peer certificate (usage %v): %v", name, usage, err)
			}
		}
		if ca, _ := os.ReadFile(fileOf(s, "peer-tls-ca")); !bytes.Equal(ca, caPEM) {
			t.Errorf("%s: --peer-tls-ca is not ca.crt", name)
		}
	}
	keyring, err := os.ReadFile(fileOf(svc, "gossip-keyring"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Fields(string(keyring)) {
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			t.Errorf("gossip keyring line %q: %d bytes (%v), want an AES key of 16, 24 or 32", line, len(k), err)
		}
	}

	// The admin token, against what the nodes require.
	pubFile := fileOf(svc, "jwt-public-key")
	issuer, _ := svc.setting("jwt-issuer")
	audience, _ := svc.setting("jwt-audience")
	admin, err := os.ReadFile(filepath.Join(dir, "admin.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	std, rest := tokenClaims(t, string(admin), pubFile)
	if err := std.Validate(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{audience}, Time: time.Now()}); err != nil {
		t.Errorf("admin.jwt against JWT_ISSUER %q, JWT_AUDIENCE %q: %v", issuer, audience, err)
	}
	if rest["role"] != "admin" || std.Expiry == nil {
		t.Errorf("admin.jwt: role %v, exp %v; want admin and an expiry", rest["role"], std.Expiry)
	}

	tok := runScript(t, "token", "-o", dir, "--role", "read-only", "--sub", "reader", "--ttl", "60", "--queues", "a.,b.")
	std, rest = tokenClaims(t, tok, pubFile)
	if rest["role"] != "read-only" || std.Subject != "reader" || std.Expiry == nil ||
		std.Expiry.Time().Sub(time.Now()) > 61*time.Second || len(rest["queues"].([]any)) != 2 {
		t.Errorf("token --role read-only --sub reader --ttl 60 --queues a.,b.: %+v %v", std, rest)
	}

	// Once made, the secrets stay: a second run changes nothing.
	before, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	runScript(t, "-o", dir)
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(before, after) {
		t.Error("a second run without --force replaced the CA")
	}
}
