package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) (*config, error) {
	t.Helper()
	var out bytes.Buffer
	return parseConfig(args, &out)
}

// Boolean flags work as Go users expect; the environment fills in what
// the command line does not say, and the command line wins.
func TestBooleanFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--pprof"}, nil, true},
		{[]string{"-pprof"}, nil, true},
		{[]string{"--pprof=true"}, nil, true},
		{[]string{"--pprof=false"}, nil, false},
		{nil, map[string]string{"QUEEN_PPROF": "true"}, true},
		{nil, map[string]string{"QUEEN_PPROF": "1"}, true},
		{[]string{"--pprof=false"}, map[string]string{"QUEEN_PPROF": "true"}, false},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		c, err := parse(t, append(tc.args, "--node-id", "n")...)
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		if c.Pprof != tc.want {
			t.Errorf("%v %v: pprof %v, want %v", tc.args, tc.env, c.Pprof, tc.want)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
	if _, err := parse(t, "--test-hooks", "true"); err == nil || !strings.Contains(err.Error(), "--flag=false") {
		t.Fatalf("a boolean given a separate value: %v", err)
	}
}

// Every flag is read from its QUEEN_ variable (and the 0.15 spelling of the
// subscription mode), typed values included.
func TestEnvironment(t *testing.T) {
	t.Setenv("QUEEN_NODE_ID", "from-env")
	t.Setenv("QUEEN_JOIN", "a:1, b:2")
	t.Setenv("QUEEN_SNAPSHOT_INTERVAL", "5s")
	t.Setenv("QUEEN_RETENTION_INTERVAL_MS", "250")
	t.Setenv("QUEEN_KV_READ_RATE", "0")
	t.Setenv("DEFAULT_SUBSCRIPTION_MODE", "all")
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "from-env" || len(c.Join) != 2 || c.Join[1] != "b:2" || c.SnapshotInterval != 5*time.Second ||
		c.RetentionInterval != 250*time.Millisecond || c.KVReadRate != -1 || c.DefaultSubscriptionMode != "all" {
		t.Fatalf("from the environment: %+v", c)
	}
	t.Setenv("QUEEN_SNAPSHOT_INTERVAL", "")
	if c, err := parse(t); err != nil || c.SnapshotInterval != time.Minute {
		t.Fatalf("an empty variable is unset: %v %v", c.SnapshotInterval, err)
	}
	t.Setenv("QUEEN_SNAPSHOT_INTERVAL", "soon")
	if _, err := parse(t); err == nil || !strings.Contains(err.Error(), "QUEEN_SNAPSHOT_INTERVAL") {
		t.Fatalf("a bad variable: %v", err)
	}
}

func TestBadValuesAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--bootstrap-expect", "0"}, {"--bootstrap-expect", "x"}, {"--default-subscription-mode", "latest"},
		{"--max-body-bytes", "10"}, {"--snapshot-interval", "1ms"}, {"--kv-read-rate", "-1"},
		{"--log-level", "loud"}, {"--timer-tick-ms", "0"}, {"stray"},
	} {
		if _, err := parse(t, append(args, "--node-id", "n")...); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}

// -h shows each flag with its type, default and variable.
func TestHelpShowsTypesAndDefaults(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, &out); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	for _, want := range []string{"-snapshot-interval duration", "(default 1m0s)", "-bootstrap-expect int", "-kv-read-rate float",
		"-join list", "[QUEEN_PPROF]", "-max-body-bytes int", "(default 16777216)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help does not show %q", want)
		}
	}
	if strings.Contains(help, "-pprof string") || strings.Contains(help, "-pprof value") {
		t.Error("pprof is not shown as a boolean")
	}
}

// The JWT settings come from the spec's JWT_* variables (spec §4.17) as
// well as from --jwt-* flags and QUEEN_JWT_*.
func TestJWTSettingsFromTheSpecVariables(t *testing.T) {
	t.Setenv("JWT_ENABLED", "true")
	t.Setenv("JWT_SECRET", "s3cret")
	t.Setenv("JWT_CLOCK_SKEW", "45")
	t.Setenv("JWT_SKIP_PATHS", "/health,/")
	t.Setenv("JWT_ROLE_WRITE_ONLY", "producer")
	t.Setenv("QUEEN_JWT_ISSUER", "queen")
	c, err := parseConfig([]string{"--jwt-audience", "brokers"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	j := c.JWT
	if !j.Enabled || j.Secret != "s3cret" || j.ClockSkew != 45*time.Second || len(j.SkipPaths) != 2 ||
		j.RoleWriteOnly != "producer" || j.Issuer != "queen" || j.Audience != "brokers" || j.RoleAdmin != "admin" {
		t.Fatalf("jwt config: %+v", j)
	}
	t.Setenv("JWT_CLOCK_SKEW", "soon")
	if _, err := parseConfig(nil, io.Discard); err == nil {
		t.Fatal("a clock skew that is neither seconds nor a duration was taken")
	}
}
