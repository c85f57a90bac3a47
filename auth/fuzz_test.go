package auth

import (
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// FuzzAuthenticate feeds Authorization headers, valid tokens and
// mutations of them included, to a verifier: it never panics, and what it
// accepts is a token it could verify (an HS256 token signed with the
// secret and unexpired, or none at all).
func FuzzAuthenticate(f *testing.F) {
	v, err := New(Config{Enabled: true, Secret: secret})
	if err != nil {
		f.Fatal(err)
	}
	defer v.Close()
	good := mintF(f, map[string]any{"sub": "s", "role": "admin", "exp": time.Now().Add(24 * time.Hour).Unix()})
	for _, seed := range []string{"", "Bearer", "Bearer ", "bearer x.y.z", "Basic dXNlcjpwYXNz", good, "Bearer " + good,
		"Bearer " + good + "x", "Bearer " + algNone(map[string]any{"role": "admin"}), "Bearer ..", "Bearer a.b.c.d.e"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		id, aerr := v.Authenticate(header)
		if (id == nil) == (aerr == nil) {
			t.Fatalf("identity %v and error %v", id, aerr)
		}
		if aerr != nil && aerr.Status != 401 {
			t.Fatalf("a refused token is a %d", aerr.Status)
		}
	})
}

func mintF(f *testing.F, c map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(secret)}, nil)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := jwtSigned(s, c)
	if err != nil {
		f.Fatal(err)
	}
	return tok
}
