package ctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"
)

// runT runs ctl in-process (no node: only paths that stop before a
// request) and returns its exit code and output.
func runT(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errw bytes.Buffer
	err := run(ctx, args, &out, &errw)
	var ec interface{ ExitCode() int }
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		code = 0
	case errors.As(err, &ec):
		code = ec.ExitCode()
		errw.WriteString(err.Error())
	default:
		code = exitFailed
		errw.WriteString(err.Error())
	}
	return code, out.String(), errw.String()
}

// Usage errors exit 2 with a short help; -h lists the flags and exits 0.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr (code != 0) or stdout
	}{
		{"no command", nil, 2, "usage: queen-node ctl"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown flag", []string{"queues", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"unknown global flag", []string{"--bogus", "queues"}, 2, "usage: queen-node ctl"},
		{"too many args", []string{"queue", "a", "b"}, 2, "usage: queen-node ctl queue <queue>"},
		{"too few args", []string{"group", "seek", "billing"}, 2, "wrong number of arguments"},
		{"bad output", []string{"-o", "yaml", "queues"}, 2, "-o must be table or json"},
		{"cert without key", []string{"queues", "--cert", "c.pem"}, 2, "--cert and --key go together"},
		{"bad url", []string{"--url", "127.0.0.1:6632", "queues"}, 2, "--url must start with http://"},
		{"seek needs one target", []string{"group", "seek", "g", "q"}, 2, "exactly one of --to-end, --timestamp, --partition"},
		{"seek with two targets", []string{"group", "seek", "g", "q", "--to-end", "--timestamp", "1h"}, 2, "exactly one of"},
		{"seek bad time", []string{"group", "seek", "g", "q", "--timestamp", "yesterday-ish"}, 2, "is not a time"},
		{"replay ids and queue", []string{"dlq", "replay", "abc", "--queue", "q"}, 2, "not both"},
		{"replay nothing", []string{"dlq", "replay"}, 2, "name dead letters by id"},
		{"replay queue without all", []string{"dlq", "replay", "--queue", "q"}, 2, "give --all"},
		{"replay all and limit", []string{"dlq", "replay", "--queue", "q", "--all", "--limit", "3"}, 2, "give --all"},
		{"purge without queue", []string{"dlq", "purge", "--yes"}, 2, "--queue is required"},
		{"kv list without prefix", []string{"kv", "list", "ns"}, 2, "--prefix is required"},
		{"maintenance maybe", []string{"maintenance", "maybe"}, 2, "on or off"},
		{"drain bad batch", []string{"drain", "q", "--batch", "0", "--yes"}, 2, "must be positive"},
		{"help", []string{"-h"}, 0, "dlq replay"},
		{"help lists global flags", []string{"--help"}, 0, "-insecure-skip-verify"},
		{"command help", []string{"dlq", "replay", "-h"}, 0, "-all"},
		{"command help names globals", []string{"queues", "-h"}, 0, "-token"},
		{"help command", []string{"help", "drain"}, 0, "-batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errw := runT(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errw)
			}
			where := out
			if tc.code != 0 {
				where = errw
			}
			if !strings.Contains(where, tc.want) {
				t.Fatalf("want %q in\n%s", tc.want, where)
			}
		})
	}
}

// Flags go anywhere among the arguments, the global ones too; after "--"
// everything is an argument.
// Every command's flags go beside the global ones (a flag defined twice
// panics), and every command has a usage line and a summary.
func TestEveryCommandsFlags(t *testing.T) {
	for path, c := range commands {
		var g globals
		fs := flag.NewFlagSet(path, flag.ContinueOnError)
		g.register(fs, builtinGlobals())
		if c.setup(fs) == nil || c.summary == "" || c.nargs == nil {
			t.Errorf("%s: incomplete", path)
		}
	}
}

// Help never shows the token of the environment.
func TestHelpHidesTheToken(t *testing.T) {
	t.Setenv("QUEEN_TOKEN", "secret-token-value")
	for _, args := range [][]string{{"-h"}, {"queues", "-h"}, {"--token", "other-secret", "dlq", "-h"}} {
		if _, out, errw := runT(t, args...); strings.Contains(out+errw, "secret") {
			t.Fatalf("%v shows a token:\n%s", args, out)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	var g globals
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	g.register(fs, defaultGlobals())
	toEnd := fs.Bool("to-end", false, "")
	pos, err := parseInterspersed(fs, []string{"billing", "--to-end", "orders", "-o", "json", "--", "--not-a-flag"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pos, ",") != "billing,orders,--not-a-flag" || !*toEnd || g.output != "json" {
		t.Fatalf("pos %q to-end %v output %q", pos, *toEnd, g.output)
	}
}

func TestLookupPrefersTwoWords(t *testing.T) {
	for args, want := range map[string]string{
		"dlq":                  "dlq",
		"dlq replay x":         "dlq replay",
		"dlq --queue q":        "dlq",
		"group seek g q":       "group seek",
		"group billing":        "group",
		"kv get ns k":          "kv get",
		"maintenance on --pop": "maintenance",
	} {
		c := lookup(strings.Fields(args))
		if c == nil || c.path != want {
			t.Errorf("%q: got %v, want %s", args, c, want)
		}
	}
	if lookup([]string{"kv"}) != nil {
		t.Error(`"kv" alone is a command`)
	}
}

func TestHumanUnits(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{count(0), "0"}, {count(9999), "9999"}, {count(12_345), "12.3k"}, {count(100_000), "100k"},
		{count(uint64(4_500_000)), "4.5M"}, {count(int64(2e9)), "2G"},
		{span(0), "0s"}, {span(45 * time.Second), "45s"}, {span(3*time.Minute + 12*time.Second), "3m12s"},
		{span(2*time.Hour + 5*time.Minute), "2h5m"}, {span(3 * time.Hour), "3h"}, {span(76 * time.Hour), "3d4h"},
		{seconds(90), "1m30s"},
		{bytesIEC(512), "512 B"}, {bytesIEC(1536), "1.5 KiB"}, {bytesIEC(3 << 30), "3.0 GiB"},
		{clip("abcdef", 4), "abc…"}, {clip("abc", 4), "abc"},
		{compact([]byte(`{ "a" : [1, 2] }`), 40), `{"a":[1,2]}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	past, future := "2026-12-01T09:57:00.000Z", "2026-12-01T10:00:20.000Z"
	if got := ago(&past, now); got != "3m ago" {
		t.Errorf("ago %q", got)
	}
	if got := ago(&future, now); got != "in 20s" {
		t.Errorf("ahead %q", got)
	}
	if got := ago(nil, now); got != "" {
		t.Errorf("nil %q", got)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]string{
		"2026-12-01T09:00:00Z":      "2026-12-01T09:00:00.000Z",
		"2026-12-01T11:00:00+02:00": "2026-12-01T09:00:00.000Z",
		"2026-11-30":                "2026-11-30T00:00:00.000Z",
		"90m":                       "2026-12-01T08:30:00.000Z",
		"-2h":                       "2026-12-01T08:00:00.000Z",
	} {
		got, err := parseWhen(in, now)
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := parseWhen("soon", now); err == nil {
		t.Error("soon parsed")
	}
}

// The API's error bodies: {"error"} with a code, reason or detail; a body
// that is not JSON is its text.
func TestErrorOf(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{404, `{"error":"Queue not found"}`, "HTTP 404: Queue not found"},
		{404, `{"error":"Dead letter not found","code":"gone"}`, "HTTP 404: Dead letter not found (gone)"},
		{400, `{"error":"kv_bad_request","reason":"kv_prefix_required","detail":"op at index 0: prefix"}`,
			"HTTP 400: kv_bad_request: op at index 0: prefix (kv_prefix_required)"},
		{502, "bad gateway\n", "HTTP 502: bad gateway"},
		{503, "", "HTTP 503: Service Unavailable"},
	} {
		if got := errorOf(tc.status, []byte(tc.body)).Error(); got != tc.want {
			t.Errorf("%d %s: %q, want %q", tc.status, tc.body, got, tc.want)
		}
	}
	if !retryable("POST", 503, []byte(`{"error":"x","code":"no_leader"}`)) || retryable("POST", 503, []byte(`{"code":"outcome_unknown"}`)) ||
		!retryable("GET", 503, nil) || !retryable("POST", 429, []byte(`{"code":"overloaded"}`)) || retryable("GET", 404, nil) {
		t.Error("retryable")
	}
}

// Without a terminal, progress is plain lines: the start, one per
// interval while the count moves, and the end.
func TestProgressLinesWithoutATerminal(t *testing.T) {
	errw := &syncWriter{w: &bytes.Buffer{}}
	g := defaultGlobals()
	g.progressEvery = 20 * time.Millisecond
	e := &env{g: g, errw: errw}
	p := e.progress("replay", "dead letters", 10)
	for range 10 {
		p.add(1)
		time.Sleep(10 * time.Millisecond)
	}
	p.finish()
	out := errw.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[0] != "replay: 0/10 dead letters (0%)" ||
		!strings.HasPrefix(lines[len(lines)-2], "replay: 10/10 dead letters (100%)") ||
		!strings.HasPrefix(lines[len(lines)-1], "replay: 10 dead letters in ") {
		t.Fatalf("progress lines:\n%s", out)
	}
	if strings.Contains(out, "\r") {
		t.Fatal("a carriage return in plain progress")
	}
	// More done than announced: the total follows.
	errw.w.Reset()
	p = e.progress("drain", "messages", 2)
	p.add(3)
	p.finish()
	if !strings.Contains(errw.String(), "drain: 3/3 messages (100%)") {
		t.Fatalf("over the total:\n%s", errw.String())
	}
}

// syncWriter lets the progress goroutine and the test write one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
