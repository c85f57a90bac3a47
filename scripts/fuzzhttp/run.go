package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/queen-node/queen-node/auth/authtest"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/pipeline"
)

// Config is one fuzz run.
type Config struct {
	N        int           // requests to send; 0 = no bound
	Duration time.Duration // time to spend; 0 = no bound (one of N and Duration must be set)
	Seed     uint64
	Bin      string // queen-node binary; "" = $QN_BIN or a fresh build
	Dir      string // where the node's data dir, log and failing bodies go; "" = a temporary dir
	// MaxChecks bounds the 4xx answers whose state hash is compared (each
	// costs two or more extra calls); 0 = every candidate.
	MaxChecks int
	// ReadSample: one request in ReadSample of those that cannot write
	// (GET and HEAD of routes other than the pops, unknown routes) is a
	// candidate for the write check too.
	ReadSample int
	MaxBody    int // the node's --max-body-bytes
	// Known are findings already reported, as "kind@route" (e.g. "write on
	// a 4xx@POST /api/v1/consumer-groups/{group}/queues/{queue}/seek"):
	// they are printed once and counted, and do not fail the run.
	Known   []string
	Out     io.Writer
	Verbose bool
}

// Report is what a run found.
type Report struct {
	Seed       uint64
	Sent       int
	Valid      int
	Classes    map[string]int // 2xx, 3xx, 4xx, 5xx, no-answer, net/http
	Statuses   map[int]int
	Allowed503 int
	Checked4xx int // 4xx answers whose state hash was compared
	KeyedSkip  int // keyed refusals, stored under their key by design, not compared
	AuthChecks int // answers held to the token's expectation (401/403)
	// ScopeChecks: scoped transactions held to their scope (403 outside)
	ScopeChecks int
	PollsCut    int // long-poll pops cut by the client's deadline
	Failures    []Failure
	Known       map[string]int // findings named in Config.Known, by kind@route
	Duration    time.Duration
	NodeLog     string
	Dir         string
	HashTime    time.Duration // spent reading the state hash
	Slowest     time.Duration // the slowest answer (long-polls apart)
	SlowestReq  string
	Codes503    map[string]int
}

// Failure is one broken promise, with the request that broke it.
type Failure struct {
	Kind   string
	Req    *req
	Resp   *resp
	Detail string
	Replay string
}

// Failure kinds.
const (
	failCrash      = "crash"            // the process exited or stopped answering /health
	failNoAnswer   = "no answer"        // a request got no answer (connection closed, or no answer in 30 s)
	fail5xx        = "5xx"              // a 5xx that is not a documented 503
	failWrite      = "write on a 4xx"   // the state hash moved across a 4xx, in every window
	failErrorBody  = "error body"       // a 4xx/5xx body without a JSON "error" string
	failAuth       = "auth"             // a token let in (or refused) against its role
	failScope      = "scope"            // a scoped token let outside its queues (or refused inside them)
	failBody2xx    = "2xx body"         // a 2xx body that is not JSON
	failPanicInLog = "panic in the log" // the node logged a panic
)

type fuzzer struct {
	cfg     Config
	g       *gen
	tok     *tokens
	node    *nodeproc.Node
	base    string
	c       *client // the fuzz requests
	probe   *client // /health and the state hash
	mux     *http.ServeMux
	routes  []string
	rep     *Report
	last    []*req // the newest requests, for a crash report
	undoAt  int    // request number at which the switches are put back (0 = none due)
	failed  map[string]int
	printed map[string]int
	// lastRead is the last state hash read; fresh is lastRead while no
	// request has been sent since (the next check's "before").
	lastRead, fresh string
}

// do sends a request of the run (not a probe).
func (f *fuzzer) do(r *req, timeout time.Duration) (*resp, error) {
	f.fresh = ""
	return f.c.do(r, timeout)
}

func (f *fuzzer) verbose(r *req, resp *resp, err error) {
	what := ""
	if err != nil {
		what = err.Error()
	} else {
		body := resp.Body
		if len(body) > 160 {
			body = body[:160]
		}
		what = fmt.Sprintf("%d %s", resp.Status, strconv.QuoteToASCII(string(bytes.TrimSpace(body))))
	}
	target := r.Target
	if len(target) > 160 {
		target = target[:160] + "..."
	}
	f.logf("#%d %s %s [%s] {%s} (%d body bytes) -> %s", r.Seq, r.Method, strconv.QuoteToASCII(target), r.Token,
		strings.Join(r.Mutation, "; "), len(r.Body), what)
}

// stderr-like output of the run
func (f *fuzzer) logf(format string, args ...any) { fmt.Fprintf(f.cfg.Out, format+"\n", args...) }

// nodeFlags start the node: JWT on with HS256, a small body limit so that
// 413 is reachable, no disk-space refusals (507 is not what this run looks
// for), and the background loops at their defaults: sweeps every 2 s,
// timers every 50 ms (the write check tells them apart from a request's
// own writes).
func nodeFlags(secret string, maxBody int) []string {
	return []string{"--jwt-enabled", "--jwt-algorithm", "HS256", "--jwt-secret", secret,
		"--jwt-issuer", jwtIssuer, "--jwt-audience", jwtAudience,
		"--max-body-bytes", strconv.Itoa(maxBody), "--min-free-disk-mb", "0", "--log-level", "info"}
}

// Run starts a node, fuzzes it, stops it and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.N <= 0 && cfg.Duration <= 0 {
		return nil, errors.New("fuzzhttp: give -n or -duration")
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 256 << 10
	}
	if cfg.ReadSample == 0 {
		cfg.ReadSample = 8
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "fuzzhttp-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	bin, err := nodeproc.Binary(ctx, cfg.Bin, filepath.Join(dir, "bin"))
	if err != nil {
		return nil, err
	}
	secret := fmt.Sprintf("fuzzhttp-secret-%016x-of-enough-length", cfg.Seed)
	tok, err := newTokens(secret)
	if err != nil {
		return nil, err
	}
	n, err := nodeproc.StartNode(ctx, nodeproc.Spec{Bin: bin, ID: "fz1", DataDir: filepath.Join(dir, "fz1"),
		LogPath: filepath.Join(dir, "fz1.log"), Flags: nodeFlags(secret, cfg.MaxBody)})
	if err != nil {
		return nil, err
	}
	defer n.Kill()
	f := newFuzzer(cfg, tok, n.URL(), "fz1")
	f.node = n
	f.rep.Dir = dir
	f.logf("fuzzhttp: seed %d; node fz1 at %s (pid %d), data and log in %s; HS256 secret %q, issuer %q, audience %q",
		cfg.Seed, n.URL(), n.PID(), dir, secret, jwtIssuer, jwtAudience)
	f.run(ctx)
	f.scanLog()
	f.rep.NodeLog = n.LogPath()
	return f.rep, nil
}

func newFuzzer(cfg Config, tok *tokens, base, nodeID string) *fuzzer {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	addr := strings.TrimPrefix(base, "http://")
	f := &fuzzer{cfg: cfg, tok: tok, base: base, c: &client{addr: addr}, probe: &client{addr: addr},
		g: &gen{r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), w: newWorld(nodeID), start: time.Now()},
		rep: &Report{Seed: cfg.Seed, Classes: map[string]int{}, Statuses: map[int]int{}, Codes503: map[string]int{},
			Known: map[string]int{}},
		failed: map[string]int{}, printed: map[string]int{}}
	f.routes, f.mux = routeTable()
	return f
}

// routeTable is every route the API serves (httpapi's own list), and a mux
// of them that tells which pattern a request reaches, as the node's does.
func routeTable() ([]string, *http.ServeMux) {
	all := httpapi.New(httpapi.Config{}).Routes()
	if !slices.Contains(all, "GET /metrics/prometheus") {
		all = append(all, "GET /metrics/prometheus") // registered only with a registry
	}
	mux := http.NewServeMux()
	var routes []string
	for _, p := range all {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
		if p != "/" && p != "/api/" {
			routes = append(routes, p)
		}
	}
	return routes, mux
}

// match is the pattern the node's mux gives the request ("" = none), and
// its URL path; ok=false when net/http cannot parse the request line or a
// header (the server then answers 400 itself, or resets the connection).
func (f *fuzzer) match(r *req) (pattern, path string, ok bool) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: x\r\n", r.Method, r.Target)
	for _, h := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	hr, err := http.ReadRequest(bufio.NewReader(&b))
	if err != nil {
		return "", "", false
	}
	_, pattern = f.mux.Handler(hr)
	return pattern, hr.URL.Path, true
}

func (f *fuzzer) run(ctx context.Context) {
	start := time.Now()
	lastProbe, lastProgress := start, start
	for i := 1; ; i++ {
		if (f.cfg.N > 0 && i > f.cfg.N) || (f.cfg.Duration > 0 && time.Since(start) >= f.cfg.Duration) || ctx.Err() != nil {
			break
		}
		r, b := f.next(i)
		r.Seq = i
		f.send(r, b)
		if f.failed[failCrash] > 0 {
			break
		}
		if time.Since(lastProbe) > time.Second {
			lastProbe = time.Now()
			if !f.alive() {
				break
			}
		}
		if time.Since(lastProgress) > 10*time.Second {
			lastProgress = time.Now()
			f.logf("fuzzhttp: %v: %d requests, %d 4xx checked for writes, %d failures", time.Since(start).Round(time.Second),
				f.rep.Sent, f.rep.Checked4xx, len(f.rep.Failures))
		}
	}
	if f.failed[failCrash] == 0 {
		f.alive()
	}
	f.rep.Duration = time.Since(start)
	f.c.close()
	f.probe.close()
}

// next is request i: the switches put back when due, else a valid request
// (about one in four) or a fuzzed one.
func (f *fuzzer) next(i int) (*req, base) {
	g := f.g
	if f.undoAt != 0 && i >= f.undoAt {
		f.undoAt = 0
		return f.undo(), base{}
	}
	if g.r.IntN(24) == 0 {
		return f.scopedTransaction()
	}
	if g.r.IntN(4) == 0 {
		return f.valid()
	}
	pattern := pick(g.r, f.routes)
	b := shapes[pattern](g)
	r := build(pattern, b)
	// Half the fuzzed requests carry a token that reaches the route, so that
	// the bad input meets the handlers; the others meet auth.
	kind := pick(g.r, f.tok.kinds)
	if g.r.IntN(2) == 0 {
		kind = f.sufficient(pattern)
	}
	r.Token = kind.name
	if kind.header != "" {
		r.Header = append(r.Header, []string{"Authorization", kind.header})
	}
	if g.r.IntN(8) != 0 {
		g.mutateRequest(r, b, f.cfg.MaxBody)
	}
	return r, b
}

// validWeights are the routes of the valid requests, by weight.
var validWeights = []struct {
	pattern string
	weight  int
}{
	{"POST /api/v1/push", 20}, {"GET /api/v1/pop/queue/{queue}", 12}, {"GET /api/v1/pop/queue/{queue}/partition/{partition}", 3},
	{"POST /api/v1/ack", 10}, {"POST /api/v1/ack/batch", 4}, {"POST /api/v1/transaction", 8},
	{"POST /api/v1/lease/{leaseId}/extend", 3}, {"POST /api/v1/kv", 8}, {"PUT /api/v1/kv/{ns}/{key...}", 4},
	{"GET /api/v1/kv/{ns}/{key...}", 2}, {"DELETE /api/v1/kv/{ns}/{key...}", 2}, {"POST /api/v1/timers", 5},
	{"DELETE /api/v1/timers/{queue}/{timerKey...}", 2}, {"POST /api/v1/configure", 4},
	{"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", 2}, {"POST /api/v1/consumer-groups/{group}/subscription", 1},
	{"DELETE /api/v1/consumer-groups/{group}", 1}, {"DELETE /api/v1/resources/queues/{queue}", 2},
	{"GET /api/v1/resources/queues", 1}, {"GET /api/v1/resources/queues/{queue}", 1}, {"GET /api/v1/dlq", 2},
	{"GET /api/v1/consumer-groups", 1}, {"GET /api/v1/timers/{queue}", 1}, {"GET /api/v1/system/audit", 1},
	{"POST /api/v1/system/maintenance", 1}, {"POST /api/v1/system/kv-timers", 1}, {"GET /api/v1/system/backup", 1},
	{"POST /api/v1/traces", 3}, {"GET /api/v1/messages/{partitionId}/{transactionId}", 2}, {"GET /api/v1/messages", 1},
	{"POST /api/v1/dlq/{id}/replay", 2}, {"POST /api/v1/messages/{partitionId}/{transactionId}/retry", 1},
	{"GET /api/v1/traces/names", 1}, {"DELETE /api/v1/dlq", 1}, {"POST /api/v1/locks", 4},
}

func (f *fuzzer) valid() (*req, base) {
	g := f.g
	total := 0
	for _, w := range validWeights {
		total += w.weight
	}
	k := g.r.IntN(total)
	pattern := validWeights[0].pattern
	for _, w := range validWeights {
		if k < w.weight {
			pattern = w.pattern
			break
		}
		k -= w.weight
	}
	b := shapes[pattern](g)
	r := build(pattern, b)
	r.Valid = true
	kind := f.sufficient(pattern)
	r.Token = kind.name
	r.Header = append(r.Header, []string{"Authorization", kind.header})
	if keyedRoutes[pattern] && g.r.IntN(5) == 0 {
		r.Mutation = append(r.Mutation, g.idemKey(r))
	}
	return r, b
}

// sufficient is a token whose role reaches the route.
func (f *fuzzer) sufficient(pattern string) tokenKind {
	acc := pipeline.RouteAccess(pattern)
	level, producer := acc.Level, acc.Producer
	var ok []tokenKind
	for _, k := range f.tok.kinds {
		if k.exp == expectRole && authtest.Allows(k.role, level, producer) && !strings.Contains(k.name, "scoped") {
			ok = append(ok, k)
		}
	}
	return pick(f.g.r, ok)
}

// undo puts the operator's switches back: maintenance off, pop maintenance
// off, KV and timers on.
func (f *fuzzer) undo() *req {
	// Three switches, three requests: the first now, the others next.
	r := build("POST /api/v1/system/kv-timers", base{body: o("kv", true, "timersSchedule", true, "timersFire", true)})
	r.Header = append(r.Header, []string{"Authorization", f.tok.admin})
	r.Valid, r.Token, r.undo = true, "admin", true
	for _, p := range []string{"POST /api/v1/system/maintenance", "POST /api/v1/system/maintenance/pop"} {
		x := build(p, base{body: o("enabled", false)})
		x.Header = append(x.Header, []string{"Authorization", f.tok.admin})
		if resp, err := f.do(x, 30*time.Second); err == nil && resp.Status != 200 {
			f.logf("fuzzhttp: putting %s back: %d %s", p, resp.Status, bytes.TrimSpace(resp.Body))
		}
	}
	return r
}

// timeout is how long a request may take: a long-poll pop is cut after
// 2.5 s (closing the connection cancels it); anything else has 30 s.
func timeoutOf(r *req) (time.Duration, bool) {
	if strings.Contains(r.Target, "/pop") && strings.Contains(r.Target, "wait=") {
		return 2500 * time.Millisecond, true
	}
	return 30 * time.Second, false
}

// send sends one request and holds its answer to every check.
func (f *fuzzer) send(r *req, b base) {
	pattern, path, parses := f.match(r)
	r.Reached = pattern
	if pattern == "" {
		r.Reached = "no route"
	}
	f.last = keepLast(append(f.last, r), 5)
	kind := f.kindOf(r.Token)
	candidate := f.cfg.MaxChecks == 0 || f.rep.Checked4xx < f.cfg.MaxChecks
	if r.Scope != "" {
		candidate = true // a scoped transaction's refusal is always compared
	} else if pattern != "" && pattern != "/" && pattern != "/api/" && writeRoute(r.Method, pattern) {
		candidate = candidate && (!r.Valid || r.Seq%4 == 0)
	} else {
		candidate = candidate && r.Seq%f.cfg.ReadSample == 0
	}
	var before string
	if candidate {
		before = f.fresh
		if before == "" {
			before = f.hash()
		}
	}
	timeout, poll := timeoutOf(r)
	t0 := time.Now()
	resp, err := f.do(r, timeout)
	if took := time.Since(t0); took > f.rep.Slowest && !poll {
		f.rep.Slowest, f.rep.SlowestReq = took, fmt.Sprintf("#%d %s %.80s", r.Seq, r.Method, r.Target)
	}
	f.rep.Sent++
	if f.cfg.Verbose {
		f.verbose(r, resp, err)
	}
	if r.Valid {
		f.rep.Valid++
	}
	if err != nil {
		if poll && errors.Is(err, errNoAnswer) {
			f.rep.PollsCut++
			f.rep.Classes["cut long-poll"]++
			return
		}
		if errors.Is(err, errSend) && len(r.Body) > 256<<10 {
			// net/http reads at most 256 KiB of a body no handler read
			// (an unknown route, a refusal before the body) and then
			// closes the connection: a body past that meets a closed
			// socket.
			f.rep.Classes["closed on a large body"]++
			return
		}
		if !parses {
			// net/http refused the request line or a header and closed the
			// connection with part of the request unread: a reset.
			f.rep.Classes["net/http 400"]++
			return
		}
		f.rep.Classes["no answer"]++
		if !f.alive() {
			return
		}
		f.fail(failNoAnswer, r, nil, err.Error())
		return
	}
	f.rep.Statuses[resp.Status]++
	if netHTTP400(resp) {
		f.rep.Classes["net/http 400"]++
		return
	}
	f.rep.Classes[fmt.Sprintf("%dxx", resp.Status/100)]++
	if resp.Status/100 == 2 {
		f.learn(r, b, pattern, resp)
	}
	f.checkStatus(r, pattern, resp)
	f.checkBody(r, pattern, resp)
	authRefused := f.checkAuth(r, pattern, path, kind, resp)
	f.checkScope(r, resp)
	if resp.Status >= 400 && resp.Status < 500 && candidate && before != "" {
		keyed := keyedRoutes[pattern] && validKey(r.header("Idempotency-Key"))
		if keyed && !authRefused && resp.Status != 401 {
			// A refusal of a keyed request is stored under its key, so that
			// a retry gets the same answer (package idempotency): a write by
			// design.
			f.rep.KeyedSkip++
		} else {
			f.checkUnchanged(r, resp, before)
			f.fresh = f.lastRead // the last reading came after every request
		}
	}
}

// alive reports whether the node is up: its process runs and /health
// answers 200 (a 503 is given 10 s to pass). A node that is not is a crash.
func (f *fuzzer) alive() bool {
	if f.node != nil && f.node.Exited() {
		f.crash(fmt.Sprintf("the process exited (%v)", f.node.ExitErr()))
		return false
	}
	h := build("GET /health", base{})
	deadline := time.Now().Add(10 * time.Second)
	last := ""
	for {
		resp, err := f.probe.do(h, 5*time.Second)
		switch {
		case err != nil:
			last = err.Error()
		case resp.Status == 200:
			return true
		default:
			last = fmt.Sprintf("%d %s", resp.Status, bytes.TrimSpace(resp.Body))
		}
		if f.node != nil && f.node.Exited() {
			f.crash(fmt.Sprintf("the process exited (%v)", f.node.ExitErr()))
			return false
		}
		if time.Now().After(deadline) {
			f.crash("/health not 200 for 10 s: " + last)
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (f *fuzzer) crash(detail string) {
	var last *req
	if len(f.last) > 0 {
		last = f.last[len(f.last)-1]
	}
	var b strings.Builder
	b.WriteString(detail)
	b.WriteString("; the last requests sent:")
	for _, r := range f.last {
		fmt.Fprintf(&b, "\n    #%d %s", r.Seq, r.curl(f.base))
	}
	if f.node != nil {
		b.WriteString("\n  the node's log ends:\n" + indent(f.node.Tail(30), "    "))
	}
	f.fail(failCrash, last, nil, b.String())
}

// scanLog fails the run on a panic the node logged (a handler's panic
// recovered into a 500, or any other).
func (f *fuzzer) scanLog() {
	if f.node == nil {
		return
	}
	var hits []string
	for _, line := range strings.Split(f.node.LogSince(0), "\n") {
		if strings.Contains(line, "panic") || strings.Contains(line, "fatal error") {
			hits = append(hits, line)
		}
	}
	if len(hits) > 0 {
		f.fail(failPanicInLog, nil, nil, fmt.Sprintf("%d line(s), the first: %s", len(hits), strings.Join(hits[:min(len(hits), 5)], "\n    ")))
	}
}

func indent(s, by string) string {
	s = strings.TrimRight(s, "\n")
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}

// fail records a failure and prints it with a command that replays it
// (bodies too long for a command line, or holding NUL, go to a file beside
// the node's log).
func (f *fuzzer) fail(kind string, r *req, resp *resp, detail string) {
	fl := Failure{Kind: kind, Req: r, Resp: resp, Detail: detail}
	at := kind
	if r != nil {
		at += "@" + r.Reached
		fl.Replay = f.replay(r, len(f.rep.Failures)+len(f.rep.Known)+1)
	}
	if known := f.known(at, resp); known != "" {
		// A finding already reported: printed once, counted, not a failure
		// of this run.
		if f.rep.Known[known]++; f.rep.Known[known] == 1 {
			f.logf("KNOWN %s: %s", kind, fl.String())
		}
		return
	}
	f.failed[kind]++
	f.rep.Failures = append(f.rep.Failures, fl)
	// The first three of each kind and route are printed; the rest counted.
	f.printed[at]++
	if f.printed[at] > 3 {
		if f.printed[at] == 4 {
			f.logf("fuzzhttp: more failures of kind %q from %s are counted, not printed", kind, at)
		}
		return
	}
	f.logf("FAIL %s: %s", kind, fl.String())
}

// known is the entry of Config.Known that names a failure, or "". An entry
// is "kind@route", optionally followed by the answer's status and then its
// "code" ("write on a 4xx@POST /api/v1/transaction 403 kv_disabled"); a
// shorter entry names every failure the longer ones would.
func (f *fuzzer) known(at string, resp *resp) string {
	full := at
	if resp != nil {
		full += " " + strconv.Itoa(resp.Status)
		var body struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(resp.Body, &body) == nil && body.Code != "" {
			full += " " + body.Code
		}
	}
	for _, k := range f.cfg.Known {
		if full == k || strings.HasPrefix(full, k+" ") {
			return k
		}
	}
	return ""
}

func (f *fuzzer) replay(r *req, n int) string {
	if r.Body != nil && (len(r.Body) > 4096 || bytes.IndexByte(r.Body, 0) >= 0) && f.rep.Dir != "" {
		path := filepath.Join(f.rep.Dir, fmt.Sprintf("failure-%d.body", n))
		if os.WriteFile(path, r.Body, 0o644) == nil {
			c := *r
			c.Body = nil
			return strings.Replace(c.curl(f.base), " --path-as-is", " --data-binary @"+path+" --path-as-is", 1)
		}
	}
	return r.curl(f.base)
}

func (fl Failure) String() string {
	var b strings.Builder
	if fl.Req != nil {
		r := fl.Req
		what := "fuzzed"
		if r.Valid {
			what = "valid"
		}
		fmt.Fprintf(&b, "request #%d (%s, made from %s, reached %s, token %q", r.Seq, what, r.Pattern, r.Reached, r.Token)
		if len(r.Mutation) > 0 {
			fmt.Fprintf(&b, ", mutations: %s", strings.Join(r.Mutation, "; "))
		}
		b.WriteString(")")
	}
	if fl.Resp != nil {
		body := fl.Resp.Body
		if len(body) > 600 {
			body = append(body[:600:600], "..."...)
		}
		fmt.Fprintf(&b, "\n  answer: %d %s", fl.Resp.Status, strconv.QuoteToASCII(string(body)))
	}
	if fl.Detail != "" {
		fmt.Fprintf(&b, "\n  %s", fl.Detail)
	}
	if fl.Replay != "" {
		fmt.Fprintf(&b, "\n  replay: %s", fl.Replay)
	}
	return b.String()
}

// Summary is the report's one line.
func (rep *Report) Summary() string {
	classes := make([]string, 0, len(rep.Classes))
	for k, v := range rep.Classes {
		classes = append(classes, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(classes)
	kinds := map[string]int{}
	for _, fl := range rep.Failures {
		kinds[fl.Kind]++
	}
	var fk []string
	for k, v := range kinds {
		fk = append(fk, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(fk)
	fails := strconv.Itoa(len(rep.Failures))
	if len(fk) > 0 {
		fails += " (" + strings.Join(fk, " ") + ")"
	}
	known := 0
	for _, n := range rep.Known {
		known += n
	}
	if known > 0 {
		fails += fmt.Sprintf(" (and %d of %d known finding(s))", known, len(rep.Known))
	}
	return fmt.Sprintf("fuzzhttp: seed=%d requests=%d (valid %d) in %v: %s; documented 503s=%d; 4xx checked for writes=%d (keyed refusals not compared=%d); auth answers checked=%d; scoped transactions checked=%d; long-polls cut=%d; failures=%s",
		rep.Seed, rep.Sent, rep.Valid, rep.Duration.Round(100*time.Millisecond), strings.Join(classes, " "), rep.Allowed503,
		rep.Checked4xx, rep.KeyedSkip, rep.AuthChecks, rep.ScopeChecks, rep.PollsCut, fails)
}

// Details are the statuses one by one, the codes of the documented 503s
// and the time the write check took.
func (rep *Report) Details() string {
	var st []int
	for k := range rep.Statuses {
		st = append(st, k)
	}
	sort.Ints(st)
	var b strings.Builder
	b.WriteString("fuzzhttp: statuses")
	for _, k := range st {
		fmt.Fprintf(&b, " %d=%d", k, rep.Statuses[k])
	}
	if len(rep.Codes503) > 0 {
		b.WriteString("; 503 codes")
		for k, v := range rep.Codes503 {
			fmt.Fprintf(&b, " %s=%d", k, v)
		}
	}
	fmt.Fprintf(&b, "; time reading the state hash %v; slowest answer %v (%s)", rep.HashTime.Round(100*time.Millisecond),
		rep.Slowest.Round(time.Millisecond), rep.SlowestReq)
	return b.String()
}
