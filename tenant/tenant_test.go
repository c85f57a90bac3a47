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
