package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The node runs with JWT on (HS256, an issuer and an audience), so every
// request carries one kind of Authorization header, from nothing at all to
// a token of each role.

const (
	jwtIssuer   = "queen-fuzz"
	jwtAudience = "brokers"
)

// expect is what auth must answer a token on a route that is not public.
type expect int

const (
	expect401  expect = iota + 1 // an invalid token: 401 on every route that is not public
	expectRole                   // a valid token of role: 403 where the role does not reach
)

// tokenKind is one kind of Authorization header.
type tokenKind struct {
	name   string
	header string // "" = no header
	exp    expect
	role   string // expectRole: the role (admin, read-write, read-only, write-only)
}

// tokens are the kinds the fuzzer sends, signed with secret.
type tokens struct {
	kinds  []tokenKind
	admin  string // an admin header, for the fuzzer's own calls
	byRole map[string]string
	scoped tokenKind // the read-write token scoped to scopePrefix
}

func sign(secret string, claims map[string]any) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(secret)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	return jwt.Signed(s).Claims(claims).Serialize()
}

func newTokens(secret string) (*tokens, error) {
	now := time.Now()
	claims := func(sub string, extra map[string]any) map[string]any {
		c := map[string]any{"sub": sub, "iss": jwtIssuer, "aud": jwtAudience, "iat": now.Unix(),
			"exp": now.Add(24 * time.Hour).Unix()}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	t := &tokens{byRole: map[string]string{}}
	var firstErr error
	mint := func(sub string, extra map[string]any) string {
		tok, err := sign(secret, claims(sub, extra))
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return tok
	}
	add := func(name, header string, exp expect, role string) {
		t.kinds = append(t.kinds, tokenKind{name: name, header: header, exp: exp, role: role})
	}
	for _, role := range []string{"read-only", "write-only", "read-write", "admin"} {
		h := "Bearer " + mint("fuzz-"+role, map[string]any{"role": role})
		t.byRole[role] = h
		add(role, h, expectRole, role)
	}
	t.admin = t.byRole["admin"]
	adminTok := strings.TrimPrefix(t.admin, "Bearer ")
	add("admin in roles[]", "Bearer "+mint("fuzz-roles", map[string]any{"roles": []string{"admin"}}), expectRole, "admin")
	add("admin without Bearer", adminTok, expectRole, "admin")
	add("admin with bearer in lower case", "bearer "+adminTok, expectRole, "admin")
	// A scoped token reaches what its role does, and is refused beyond its
	// queues (403) besides.
	add("read-write scoped to fz.a", "Bearer "+mint("fuzz-scoped", map[string]any{"role": "read-write", "queues": []string{scopePrefix}}), expectRole, "read-write")
	t.scoped = t.kinds[len(t.kinds)-1]
	// Valid tokens with no role the node knows reach nothing.
	add("no role", "Bearer "+mint("fuzz-norole", nil), expectRole, "none")
	add("unknown role", "Bearer "+mint("fuzz-root", map[string]any{"role": "root"}), expectRole, "none")
	add("role of another type", "Bearer "+mint("fuzz-odd", map[string]any{"role": 7, "roles": "admin", "sub": strings.Repeat("ü", 300)}), expectRole, "none")
	// A queues claim that does not read as a list is an invalid token.
	add("queues claim not a list", "Bearer "+mint("fuzz-odd", map[string]any{"role": "admin", "queues": 3}), expect401, "")
	add("no token", "", expect401, "")
	add("empty Bearer", "Bearer ", expect401, "")
	add("garbage", "Bearer !!not-a-token!!", expect401, "")
	add("three garbage segments", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.AAAA", expect401, "")
	add("Basic scheme", "Basic dXNlcjpwYXNz", expect401, "")
	add("bad signature", t.admin+"A", expect401, "")
	add("signed with another secret", "Bearer "+must(sign(secret+"-other", claims("evil", map[string]any{"role": "admin"}))), expect401, "")
	add("alg none", "Bearer "+unsigned(claims("evil", map[string]any{"role": "admin"})), expect401, "")
	add("expired", "Bearer "+mint("late", map[string]any{"role": "admin", "exp": now.Add(-time.Hour).Unix()}), expect401, "")
	add("not valid yet", "Bearer "+mint("early", map[string]any{"role": "admin", "nbf": now.Add(time.Hour).Unix()}), expect401, "")
	add("wrong issuer", "Bearer "+mint("evil", map[string]any{"role": "admin", "iss": "evil"}), expect401, "")
	add("wrong audience", "Bearer "+mint("evil", map[string]any{"role": "admin", "aud": "others"}), expect401, "")
	add("huge token", "Bearer "+strings.Repeat("A", 40000), expect401, "")
	add("two tokens", t.admin+" "+adminTok, expect401, "")
	return t, firstErr
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// unsigned is a token with "alg":"none".
func unsigned(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

func (t *tokens) String() string { return fmt.Sprintf("%d kinds of token", len(t.kinds)) }
