package tenant

import (
	"context"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, ok := range []string{"default", "acme", "a", "team-7_x", "0abc", strings.Repeat("a", 63)} {
		if err := Valid(ok); err != nil {
			t.Errorf("Valid(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "*", "Acme", "-a", "_a", "a b", "a/b", "a:b", "é", strings.Repeat("a", 64), "a\x00"} {
		err := Valid(bad)
		if err == nil {
			t.Errorf("Valid(%q) = nil, want an error", bad)
		} else if !strings.Contains(err.Error(), Rule) {
			t.Errorf("Valid(%q) = %v, want it to state the rule", bad, err)
		}
	}
}

func TestKeyRoundTrip(t *testing.T) {
	if Key(Default) != "" || Name("") != Default {
		t.Fatalf("the default tenant must be stored under today's keys")
	}
	if Key("acme") != "acme" || Name("acme") != "acme" {
		t.Fatalf("another tenant keeps its name")
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if From(ctx) != Default || Carried(ctx) {
		t.Fatalf("a bare context is the default tenant, not carried")
	}
	ctx = With(ctx, "acme")
	if From(ctx) != "acme" || !Carried(ctx) {
		t.Fatalf("From = %q", From(ctx))
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		src     Source
		name    string
		ignored bool
		bad     bool
	}{
		{Source{}, Default, false, false},
		{Source{Header: "acme"}, Default, true, false},                                  // not trusted: ignored
		{Source{Header: "acme", TrustHeader: true}, "acme", false, false},               // a proxy's
		{Source{Header: "Bad!", TrustHeader: true}, "", false, true},                    // refused with the rule
		{Source{Claim: "acme"}, "acme", false, false},                                   // the claim
		{Source{Claim: "acme", Header: "beta", TrustHeader: true}, "acme", true, false}, // never overridden
		{Source{Claim: All}, Default, false, false},
		{Source{Claim: All, Header: "beta"}, "beta", false, false}, // an admin of every tenant picks
		{Source{Claim: All, Header: "*"}, "", false, true},
	} {
		name, ignored, err := Resolve(c.src)
		if name != c.name || ignored != c.ignored || (err != nil) != c.bad {
			t.Errorf("Resolve(%+v) = %q, %v, %v; want %q, %v, bad=%v", c.src, name, ignored, err, c.name, c.ignored, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), Rule) {
			t.Errorf("Resolve(%+v): %v does not state the rule", c.src, err)
		}
	}
}
