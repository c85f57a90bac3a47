// Package authtest is what the auth matrices of both front ends expect:
// their own statement of the levels, written apart from auth.Identity, so
// that a matrix checks the code against it rather than against itself.
package authtest

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/auth"
)

// Allows says whether a token with role may call a route of level; producer
// marks the routes a write-only token may call. Roles nest (admin ⊇
// read-write ⊇ read-only); write-only reaches the producer routes only.
func Allows(role string, level auth.Level, producer bool) bool {
	switch role {
	case "admin":
		return true
	case "read-write":
		return level <= auth.ReadWrite
	case "read-only":
		return level <= auth.ReadOnly
	case "write-only":
		return level == auth.Public || producer
	}
	return false
}

// Unchanged reports whether a refused call changed nothing: the state hash
// is the same after it as before. Every applied entry changes the hash
// (the applied index is part of it), and the node's own entries (a sweep,
// a timer step) may land meanwhile, so a changed hash is looked at again:
// the call is repeated until a window shows no change, up to five times.
// A call that writes changes the hash in every window.
func Unchanged(hash func() string, before string, call func()) bool {
	for range 5 {
		if hash() == before {
			return true
		}
		before = hash()
		call()
	}
	return hash() == before
}

// The issuer and audience every Kinds token names, unless it is made to
// name another: a matrix's verifier is configured with them.
const (
	Issuer   = "queen"
	Audience = "brokers"
)

// Kind is one kind of caller of a matrix: the bearer token it sends ("" =
// none) and the role it is let in with ("" = refused as unauthenticated).
type Kind struct {
	Name, Token, Role string
}

// Kinds are the ten kinds of caller of the auth matrices: no token,
// expired, a bad signature, alg none, another issuer, another audience, and
// one valid token per role. Tokens are HS256 under secret, for Issuer and
// Audience.
func Kinds(secret string) ([]Kind, error) {
	sign := func(sub string, extra map[string]any) (string, error) {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(secret)}, (&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			return "", err
		}
		c := map[string]any{"sub": sub, "iss": Issuer, "aud": Audience, "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range extra {
			c[k] = v
		}
		return jwt.Signed(s).Claims(c).Serialize()
	}
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	pl, _ := json.Marshal(map[string]any{"sub": "x", "role": "admin", "iss": Issuer, "aud": Audience, "exp": time.Now().Add(time.Hour).Unix()})
	unsigned := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(pl) + "."
	out := []Kind{{Name: "no token"}, {Name: "alg none", Token: unsigned}}
	for _, k := range []struct {
		name, sub, role string
		extra           map[string]any
		suffix          string
	}{
		{"expired", "x", "", map[string]any{"role": "admin", "exp": time.Now().Add(-time.Hour).Unix()}, ""},
		{"bad signature", "x", "", map[string]any{"role": "admin"}, "A"},
		{"wrong issuer", "x", "", map[string]any{"role": "admin", "iss": "evil"}, ""},
		{"wrong audience", "x", "", map[string]any{"role": "admin", "aud": "others"}, ""},
		{"read-only", "ro", "read-only", map[string]any{"role": "read-only"}, ""},
		{"write-only", "wo", "write-only", map[string]any{"role": "write-only"}, ""},
		{"read-write", "rw", "read-write", map[string]any{"role": "read-write"}, ""},
		{"admin", "ad", "admin", map[string]any{"role": "admin"}, ""},
	} {
		tok, err := sign(k.sub, k.extra)
		if err != nil {
			return nil, err
		}
		out = append(out, Kind{Name: k.name, Token: tok + k.suffix, Role: k.role})
	}
	return out, nil
}
