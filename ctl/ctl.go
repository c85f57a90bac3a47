package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Exit codes: 0 done, 1 the API (or the way to it) refused or failed, 2 a
// usage error.
const (
	exitFailed = 1
	exitUsage  = 2
)

// usageError is a command line ctl cannot run: exit 2, after a short help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ExitCode is 2.
func (e *usageError) ExitCode() int { return exitUsage }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// errAborted: the operator did not confirm a destructive command.
var errAborted = errors.New("aborted; nothing was changed")

// runFunc runs a command with its positional arguments.
type runFunc func(e *env, args []string) error

// command is one subcommand. setup defines its own flags on fs and returns
// the function that runs it with them.
type command struct {
	path    string // "dlq replay"
	args    string // the positional arguments and main flags, for the usage line
	summary string
	nargs   func(n int) bool // accepts n positional arguments
	setup   func(fs *flag.FlagSet) runFunc
}

func exactly(k int) func(int) bool { return func(n int) bool { return n == k } }
func between(lo, hi int) func(int) bool {
	return func(n int) bool { return n >= lo && n <= hi }
}
func atLeast(k int) func(int) bool { return func(n int) bool { return n >= k } }

// commands is filled by the files of each group of commands (init).
var commands = map[string]*command{}

func register(cs ...*command) {
	for _, c := range cs {
		if _, dup := commands[c.path]; dup {
			panic("ctl: command registered twice: " + c.path)
		}
		commands[c.path] = c
	}
}

// stdin is where a confirmation is read.
var stdin io.Reader = os.Stdin

// Run is `queen-node ctl ARGS`: it writes the command's answer to stdout
// and progress, prompts and help for errors to stderr. A usage error
// (exit 2) has an ExitCode method; -h returns flag.ErrHelp (exit 0).
func Run(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var g globals
	top := flag.NewFlagSet("queen-node ctl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top, defaultGlobals())
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout)
			return err
		}
		printShortHelp(stderr)
		return usagef("%v", err)
	}
	rest := top.Args()
	if len(rest) == 0 {
		printShortHelp(stderr)
		return usagef("name a command")
	}
	if rest[0] == "help" {
		if c := lookup(rest[1:]); c != nil {
			printCommandHelp(stdout, c)
			return nil
		}
		printHelp(stdout)
		return nil
	}
	c := lookup(rest)
	if c == nil {
		printShortHelp(stderr)
		return usagef("unknown command %q", rest[0])
	}
	words := len(strings.Fields(c.path))
	fs := flag.NewFlagSet("queen-node ctl "+c.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs, g) // the global flags work after the command too
	runIt := c.setup(fs)
	pos, err := parseInterspersed(fs, rest[words:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, c)
			return err
		}
		printCommandUsage(stderr, c)
		return usagef("%v", err)
	}
	if !c.nargs(len(pos)) {
		printCommandUsage(stderr, c)
		return usagef("%s: wrong number of arguments (%d)", c.path, len(pos))
	}
	if err := g.check(); err != nil {
		printCommandUsage(stderr, c)
		return err
	}
	e, err := newEnv(ctx, g, stdout, stderr)
	if err != nil {
		return err
	}
	defer e.close()
	err = runIt(e, pos)
	var ue *usageError
	if errors.As(err, &ue) {
		printCommandUsage(stderr, c)
	}
	return err
}

// lookup finds the command named by the first one or two words of args.
func lookup(args []string) *command {
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c
		}
	}
	if len(args) >= 1 {
		return commands[args[0]]
	}
	return nil
}

// parseInterspersed parses flags anywhere among the positional arguments
// ("group seek billing orders --to-end"); after "--" everything is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// globals are the flags every command takes.
type globals struct {
	url, token    string
	tenant        string
	ca, cert, key string
	insecure      bool
	output        string
	timeout       time.Duration
	progressEvery time.Duration
}

// builtinGlobals are the defaults without the environment: what help
// shows (never a token).
func builtinGlobals() globals {
	return globals{url: "http://127.0.0.1:6632", output: "table", timeout: 30 * time.Second, progressEvery: time.Second}
}

func defaultGlobals() globals {
	g := builtinGlobals()
	if v := os.Getenv("QUEEN_URL"); v != "" {
		g.url = v
	}
	g.token = os.Getenv("QUEEN_TOKEN")
	g.tenant = os.Getenv("QUEEN_TENANT")
	return g
}

// register defines the global flags on fs with def's values as defaults.
func (g *globals) register(fs *flag.FlagSet, def globals) {
	fs.StringVar(&g.url, "url", def.url, "HTTP(S) address of any node (env QUEEN_URL)")
	fs.StringVar(&g.token, "token", def.token, "bearer token (JWT) sent with every request (env QUEEN_TOKEN)")
	fs.StringVar(&g.tenant, "tenant", def.tenant, "tenant named in the x-queen-tenant header (env QUEEN_TENANT): read by a node with --trust-tenant-header, or for an admin token of every tenant")
	fs.StringVar(&g.ca, "ca", def.ca, "PEM file of the CA(s) to trust for https:// (instead of the system roots)")
	fs.BoolVar(&g.insecure, "insecure-skip-verify", def.insecure, "do not verify the node's certificate (testing only)")
	fs.StringVar(&g.cert, "cert", def.cert, "PEM client certificate (with --key)")
	fs.StringVar(&g.key, "key", def.key, "PEM key of --cert")
	fs.StringVar(&g.output, "o", def.output, "output: table (aligned, human units) or json (the API's JSON)")
	fs.StringVar(&g.output, "output", def.output, "same as -o")
	fs.DurationVar(&g.timeout, "timeout", def.timeout, "bound on each request")
	fs.DurationVar(&g.progressEvery, "progress-interval", def.progressEvery,
		"how often a long command prints a progress line when stderr is not a terminal")
}

func (g *globals) check() error {
	switch {
	case g.output != "table" && g.output != "json":
		return usagef("-o must be table or json, not %q", g.output)
	case (g.cert == "") != (g.key == ""):
		return usagef("--cert and --key go together")
	case g.timeout <= 0:
		return usagef("--timeout must be positive")
	case g.progressEvery <= 0:
		return usagef("--progress-interval must be positive")
	case !strings.HasPrefix(g.url, "http://") && !strings.HasPrefix(g.url, "https://"):
		return usagef("--url must start with http:// or https://, not %q", g.url)
	}
	return nil
}

// printShortHelp is the help of a usage error: the commands' usage lines.
func printShortHelp(w io.Writer) {
	fmt.Fprint(w, "usage: queen-node ctl [global flags] COMMAND [ARGS] [flags]\n")
	for _, p := range commandPaths() {
		fmt.Fprintf(w, "  %s\n", strings.TrimSpace(p+" "+commands[p].args))
	}
	fmt.Fprint(w, "(queen-node ctl -h for what each does and the flags)\n")
}

func commandPaths() []string {
	paths := make([]string, 0, len(commands))
	for p := range commands {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `usage: queen-node ctl [global flags] COMMAND [ARGS] [flags]

The operator's command line for a queen-node cluster, over its HTTP API.
Exit status: 0 done, 1 refused or failed (the API's error and HTTP status
on stderr), 2 a usage error.

commands:
`)
	for _, p := range commandPaths() {
		fmt.Fprintf(w, "  %-14s %s\n", p, commands[p].summary)
	}
	fmt.Fprint(w, "\nglobal flags (before or after the command):\n")
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var g globals
	g.register(fs, builtinGlobals())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n`queen-node ctl COMMAND -h` shows a command's own flags.\n")
}

func printCommandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: queen-node ctl %s\n(queen-node ctl %s -h for its flags)\n", strings.TrimSpace(c.path+" "+c.args), c.path)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: queen-node ctl %s\n\n%s\n", strings.TrimSpace(c.path+" "+c.args), c.summary)
	fs := flag.NewFlagSet(c.path, flag.ContinueOnError)
	c.setup(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fmt.Fprint(w, "\nglobal flags:\n")
	gs := flag.NewFlagSet("", flag.ContinueOnError)
	var x globals
	x.register(gs, builtinGlobals())
	gs.SetOutput(w)
	gs.PrintDefaults()
}
