package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const secret = "a-test-secret-of-enough-length-32b"

// mint signs claims with key under alg (kid optional).
func mint(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(extra map[string]any) map[string]any {
	c := map[string]any{"sub": "svc-orders", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func mustNew(t *testing.T, c Config) *Verifier {
	t.Helper()
	c.Enabled = true
	v, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func TestHS256RolesAndTheSpecRefusals(t *testing.T) {
	v := mustNew(t, Config{Secret: secret, Issuer: "queen", Audience: "brokers"})
	good := map[string]any{"iss": "queen", "aud": "brokers"}
	with := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, x := range good {
			out[k] = x
		}
		for k, x := range m {
			out[k] = x
		}
		return claims(out)
	}
	id, err := v.Authenticate("Bearer " + mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"role": "read-only"})))
	if err != nil || id.Sub != "svc-orders" || !id.Allows(ReadOnly, false) || id.Allows(ReadWrite, false) {
		t.Fatalf("read-only: %+v %v", id, err)
	}
	// The prefix is matched case-insensitively, and a bare token is taken.
	tok := mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"roles": []string{"x", "admin"}}))
	for _, h := range []string{"bearer " + tok, "BEARER " + tok, tok} {
		if id, err := v.Authenticate(h); err != nil || !id.Allows(Admin, false) {
			t.Fatalf("%q: %+v %v", h[:8], id, err)
		}
	}
	for _, c := range []struct {
		name   string
		header string
		want   *Error
	}{
		{"no token", "", ErrNoToken},
		{"bearer alone", "Bearer ", ErrNoToken},
		{"garbage", "Bearer not.a.jwt", ErrSignature},
		{"another secret", "Bearer " + mint(t, jose.HS256, []byte("another-secret-of-32-bytes-length!"), "", with(nil)), ErrSignature},
		{"expired", "Bearer " + mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})), ErrExpired},
		{"wrong issuer", "Bearer " + mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"iss": "evil"})), ErrIssuer},
		{"wrong audience", "Bearer " + mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"aud": "others"})), ErrAudience},
		{"alg none", "Bearer " + algNone(with(map[string]any{"role": "admin"})), ErrSignature},
		{"RS256 when only HS256 is set up", "Bearer " + mint(t, jose.RS256, rsaKey(t), "", with(nil)), ErrSignature},
	} {
		if _, err := v.Authenticate(c.header); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Within the clock skew an expired token still passes.
	if _, err := v.Authenticate(mint(t, jose.HS256, []byte(secret), "", with(map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()}))); err != nil {
		t.Fatalf("10 s past exp with 30 s skew: %v", err)
	}
}

func algNone(c map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemOf(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestRS256AndEdDSAFromAPEMOrAFile(t *testing.T) {
	rk := rsaKey(t)
	epub, epriv, _ := ed25519.GenerateKey(rand.Reader)
	v := mustNew(t, Config{Algorithm: "RS256", PublicKey: pemOf(t, &rk.PublicKey)})
	if id, err := v.Authenticate(mint(t, jose.RS256, rk, "", claims(map[string]any{"role": "read-write"}))); err != nil || !id.Allows(ReadWrite, false) {
		t.Fatalf("RS256: %+v %v", id, err)
	}
	if _, err := v.Authenticate(mint(t, jose.HS256, []byte(secret), "", claims(nil))); err != ErrSignature {
		t.Fatalf("HS256 against an RS256 node: %v", err)
	}
	file := filepath.Join(t.TempDir(), "ed.pem")
	os.WriteFile(file, []byte(pemOf(t, epub)), 0o600)
	v = mustNew(t, Config{Algorithm: "EdDSA", PublicKey: file})
	if id, err := v.Authenticate(mint(t, jose.EdDSA, epriv, "", claims(map[string]any{"role": "write-only"}))); err != nil ||
		!id.Allows(ReadWrite, true) || id.Allows(ReadWrite, false) || id.Allows(ReadOnly, false) || !id.WriteOnly() {
		t.Fatalf("EdDSA write-only: %+v %v", id, err)
	}
	if _, err := New(Config{Enabled: true, Algorithm: "RS256"}); err == nil {
		t.Fatal("RS256 without a key started")
	}
	if _, err := New(Config{Enabled: true}); err == nil {
		t.Fatal("JWT on without any key started")
	}
}

func jwks(t *testing.T, kid string, pub any) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAJWKSFileIsReloadedWhenItChanges(t *testing.T) {
	k1, k2 := rsaKey(t), rsaKey(t)
	file := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(file, jwks(t, "k1", &k1.PublicKey), 0o600)
	v := mustNew(t, Config{JWKSFile: file})
	if _, err := v.Authenticate(mint(t, jose.RS256, k1, "k1", claims(nil))); err != nil {
		t.Fatalf("k1: %v", err)
	}
	if _, err := v.Authenticate(mint(t, jose.RS256, k2, "k2", claims(nil))); err != ErrSignature {
		t.Fatalf("k2 before the reload: %v", err)
	}
	os.WriteFile(file, jwks(t, "k2", &k2.PublicKey), 0o600)
	os.Chtimes(file, time.Now().Add(time.Second), time.Now().Add(time.Second))
	if _, err := v.Authenticate(mint(t, jose.RS256, k2, "k2", claims(nil))); err != nil {
		t.Fatalf("k2 after the reload: %v", err)
	}
	// A broken file keeps the keys loaded before.
	os.WriteFile(file, []byte("{not json"), 0o600)
	os.Chtimes(file, time.Now().Add(2*time.Second), time.Now().Add(2*time.Second))
	if _, err := v.Authenticate(mint(t, jose.RS256, k2, "k2", claims(nil))); err != nil {
		t.Fatalf("k2 after a broken file: %v", err)
	}
}

func TestAJWKSURLIsFetchedAtStartAndRefreshed(t *testing.T) {
	k1, k2 := rsaKey(t), rsaKey(t)
	current := jwks(t, "k1", &k1.PublicKey)
	var served = make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(current)
		served <- struct{}{}
	}))
	defer srv.Close()
	v := mustNew(t, Config{JWKSURL: srv.URL, JWKSRefresh: 50 * time.Millisecond})
	if _, err := v.Authenticate(mint(t, jose.RS256, k1, "k1", claims(nil))); err != nil {
		t.Fatalf("k1: %v", err)
	}
	current = jwks(t, "k2", &k2.PublicKey)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := v.Authenticate(mint(t, jose.RS256, k2, "k2", claims(nil))); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated key was never fetched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := New(Config{Enabled: true, JWKSURL: "http://127.0.0.1:1/none"}); err == nil || !strings.Contains(err.Error(), "JWKS") {
		t.Fatalf("an unreachable JWKS URL at start: %v", err)
	}
}

func TestSkipPathsMatchExactly(t *testing.T) {
	v := mustNew(t, Config{Secret: secret})
	if !v.Skip("/") || !v.Skip("/health") || v.Skip("/api/v1/push") || v.Skip("/healthz") {
		t.Fatal("skip paths are not exact")
	}
	v = mustNew(t, Config{Secret: secret, SkipPaths: []string{"/health"}})
	if v.Skip("/") {
		t.Fatal("an explicit list still skipped /")
	}
}

func jwtSigned(s jose.Signer, c map[string]any) (string, error) {
	return jwt.Signed(s).Claims(c).Serialize()
}

// A short HMAC secret is refused at start, naming the rule and the length
// it got (RFC 7518 §3.2): go-jose would refuse it for every token anyway.
func TestAShortHMACSecretRefusesToStart(t *testing.T) {
	for _, s := range []string{"s3cret", strings.Repeat("x", MinHMACKeyBytes-1)} {
		_, err := New(Config{Enabled: true, Secret: s})
		if err == nil || !strings.Contains(err.Error(), "RFC 7518") || !strings.Contains(err.Error(), fmt.Sprintf("is %d bytes", len(s))) {
			t.Errorf("a %d-byte secret: %v", len(s), err)
		}
	}
	v := mustNew(t, Config{Secret: strings.Repeat("x", MinHMACKeyBytes)})
	if _, err := v.Authenticate(mint(t, jose.HS256, []byte(strings.Repeat("x", MinHMACKeyBytes)), "", claims(nil))); err != nil {
		t.Fatalf("a 32-byte secret: %v", err)
	}
}

// An oct key in a JWKS file or URL is held to the same rule, named by its
// kid; one long enough verifies HS256 tokens of its kid.
func TestJWKSOctKeysAreCheckedAndUsed(t *testing.T) {
	octSet := func(kid string, key []byte) []byte {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: kid, Algorithm: string(jose.HS256), Use: "sig"}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(file, octSet("short-1", []byte("sixteen-byte-key")), 0o600)
	if _, err := New(Config{Enabled: true, JWKSFile: file}); err == nil || !strings.Contains(err.Error(), `"short-1"`) || !strings.Contains(err.Error(), "16 bytes") {
		t.Fatalf("a JWKS file with a 16-byte oct key: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(octSet("short-2", []byte("short")))
	}))
	defer srv.Close()
	if _, err := New(Config{Enabled: true, JWKSURL: srv.URL}); err == nil || !strings.Contains(err.Error(), `"short-2"`) {
		t.Fatalf("a JWKS URL with a 5-byte oct key: %v", err)
	}
	long := []byte(strings.Repeat("k", 48))
	os.WriteFile(file, octSet("long", long), 0o600)
	v := mustNew(t, Config{JWKSFile: file})
	if _, err := v.Authenticate(mint(t, jose.HS256, long, "long", claims(nil))); err != nil {
		t.Fatalf("an HS256 token of the JWKS oct key: %v", err)
	}
	if _, err := v.Authenticate(mint(t, jose.HS256, []byte(strings.Repeat("z", 48)), "long", claims(nil))); err != ErrSignature {
		t.Fatalf("an HS256 token of another key: %v", err)
	}
}

// The tenant claim (issue 26): a valid name or "*" on an admin token;
// anything else is a 400 stating the rule. What spans every tenant of the
// log (Operator) is an admin's of the default tenant or of every tenant,
// never a tenant's own admin's.
func TestTenantClaimAndTheOperatorLevel(t *testing.T) {
	v := mustNew(t, Config{Secret: secret})
	auth := func(extra map[string]any) (*Identity, *Error) {
		return v.Authenticate("Bearer " + mint(t, jose.HS256, []byte(secret), "", claims(extra)))
	}
	for _, c := range []struct {
		claims   map[string]any
		tenant   string
		admin    bool
		operator bool
		all      bool
	}{
		{map[string]any{"role": "admin"}, "", true, true, false},
		{map[string]any{"role": "admin", "tenant": "default"}, "default", true, true, false},
		{map[string]any{"role": "admin", "tenant": "*"}, "*", true, true, true},
		{map[string]any{"role": "admin", "tenant": "acme"}, "acme", true, false, false},
		{map[string]any{"role": "read-write", "tenant": "acme"}, "acme", false, false, false},
	} {
		id, err := auth(c.claims)
		if err != nil {
			t.Fatalf("%v: %v", c.claims, err)
		}
		if id.Tenant != c.tenant || id.Allows(Admin, false) != c.admin || id.Allows(Operator, false) != c.operator || id.AllTenants() != c.all {
			t.Errorf("%v: tenant %q admin %v operator %v all %v", c.claims, id.Tenant, id.Allows(Admin, false),
				id.Allows(Operator, false), id.AllTenants())
		}
	}
	for _, bad := range []any{"Acme Corp", "", 7, []string{"a"}} {
		_, err := auth(map[string]any{"role": "admin", "tenant": bad})
		if err == nil || err.Status != 400 || !strings.Contains(err.Msg, "tenant") {
			t.Errorf("tenant claim %v: %v", bad, err)
		}
	}
	if _, err := auth(map[string]any{"role": "read-write", "tenant": "*"}); err == nil || err.Status != 400 {
		t.Errorf(`a read-write token of every tenant ("*"): %v`, err)
	}
}
