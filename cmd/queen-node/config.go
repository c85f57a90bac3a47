package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is everything the command line and the environment can set. Each
// flag --some-name is also read from QUEEN_SOME_NAME when not given on the
// command line.
type config struct {
	NodeID                  string
	DataDir                 string
	HTTPAddr                string
	GRPCAddr                string
	RaftAddr                string
	GossipAddr              string
	Join                    []string
	AdvertiseAddr           string
	BootstrapExpect         int
	DefaultSubscriptionMode string
	MaxBodyBytes            int64
	RetentionInterval       time.Duration
	SnapshotThreshold       uint64
	SnapshotInterval        time.Duration
	LogLevel                string
	Pprof                   bool
	IdempotencyTTL          time.Duration
	KVReadRate              float64
	TimerTick               time.Duration
	TestHooks               bool
}

type flagSpec struct {
	name, def, help string
	set             func(c *config, v string) error
}

func str(dst func(*config) *string) func(*config, string) error {
	return func(c *config, v string) error { *dst(c) = v; return nil }
}

var flagTable = []flagSpec{
	{"node-id", "", "this node's id; default: the hostname", str(func(c *config) *string { return &c.NodeID })},
	{"data-dir", "./queen-data", "where the Raft log and the state live", str(func(c *config) *string { return &c.DataDir })},
	{"http-addr", "127.0.0.1:6632", "address of the Queen HTTP API", str(func(c *config) *string { return &c.HTTPAddr })},
	{"grpc-addr", "127.0.0.1:6633", "address of the gRPC API and the internal forwarding service", str(func(c *config) *string { return &c.GRPCAddr })},
	{"raft-addr", "127.0.0.1:6634", "address of the Raft transport", str(func(c *config) *string { return &c.RaftAddr })},
	{"gossip-addr", "127.0.0.1:6635", "address of the gossip (memberlist) listener", str(func(c *config) *string { return &c.GossipAddr })},
	{"join", "", "comma-separated gossip addresses of other nodes", func(c *config, v string) error {
		c.Join = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Join = append(c.Join, a)
			}
		}
		return nil
	}},
	{"advertise-addr", "", "host name or IP other nodes reach this one at, with the ports of the *-addr flags; default: the host of each *-addr (which then must not be 0.0.0.0)", str(func(c *config) *string { return &c.AdvertiseAddr })},
	{"bootstrap-expect", "1", "voters to wait for before bootstrapping the cluster", func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errors.New("must be an integer >= 1")
		}
		c.BootstrapExpect = n
		return nil
	}},
	{"default-subscription-mode", "new", "where a new consumer group starts when the pop does not say: new | all", func(c *config, v string) error {
		if v != "new" && v != "all" {
			return errors.New(`must be "new" or "all"`)
		}
		c.DefaultSubscriptionMode = v
		return nil
	}},
	{"max-body-bytes", "16777216", "largest request body accepted", func(c *config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return errors.New("must be an integer >= 1024")
		}
		c.MaxBodyBytes = n
		return nil
	}},
	{"retention-interval-ms", "2000", "period of the leader's sweep entries (expired leases, KV, deleted queues)", func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			return errors.New("must be an integer >= 10")
		}
		c.RetentionInterval = time.Duration(n) * time.Millisecond
		return nil
	}},
	{"snapshot-threshold", "262144", "log entries between snapshots (snapshots are also taken every 256 MiB of log, or half the state's size)", func(c *config, v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 1 {
			return errors.New("must be an integer >= 1")
		}
		c.SnapshotThreshold = n
		return nil
	}},
	{"snapshot-interval", "60s", "how often to check whether a snapshot is due", func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond {
			return errors.New("must be a duration >= 10ms")
		}
		c.SnapshotInterval = d
		return nil
	}},
	{"idempotency-ttl", "24h", "how long an Idempotency-Key's first answer is kept", func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return errors.New("must be a duration >= 1s")
		}
		c.IdempotencyTTL = d
		return nil
	}},
	{"kv-read-rate", "200", "KV reads per second on this node outside transactions (burst twice that); 0 = unlimited", func(c *config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return errors.New("must be a number >= 0")
		}
		c.KVReadRate = f
		if f == 0 {
			c.KVReadRate = -1 // unlimited
		}
		return nil
	}},
	{"timer-tick-ms", "50", "how often the leader looks for due timers", func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errors.New("must be an integer >= 1")
		}
		c.TimerTick = time.Duration(n) * time.Millisecond
		return nil
	}},
	{"test-hooks", "false", "serve /debug/clock-skew and /debug/step-down for fault tests (never in production)", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("must be true or false")
		}
		c.TestHooks = b
		return nil
	}},
	{"pprof", "false", "serve /debug/pprof/ on the HTTP address", func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("must be true or false")
		}
		c.Pprof = b
		return nil
	}},
	{"log-level", "info", "debug | info | warn | error", str(func(c *config) *string { return &c.LogLevel })},
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "QUEEN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// aliases are older spellings still honoured (0.15 names).
var aliases = map[string]string{"default-subscription-mode": "DEFAULT_SUBSCRIPTION_MODE"}

// parseConfig reads flags, then the environment for flags not given.
func parseConfig(args []string) (*config, error) {
	fs := flag.NewFlagSet("queen-node", flag.ContinueOnError)
	vals := make(map[string]*string, len(flagTable))
	for _, f := range flagTable {
		vals[f.name] = fs.String(f.name, f.def, fmt.Sprintf("%s [%s]", f.help, envName(f.name)))
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	c := &config{}
	for _, f := range flagTable {
		v := *vals[f.name]
		if !given[f.name] {
			if e, ok := os.LookupEnv(envName(f.name)); ok {
				v = e
			} else if alias, ok := aliases[f.name]; ok {
				if e, ok := os.LookupEnv(alias); ok {
					v = e
				}
			}
		}
		if err := f.set(c, v); err != nil {
			return nil, fmt.Errorf("--%s=%q: %w", f.name, v, err)
		}
	}
	if c.NodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, errors.New("--node-id is required when the hostname is unknown")
		}
		c.NodeID = h
	}
	return c, nil
}

// advertisedAddrs are the addresses other nodes and clients reach this node
// at: --advertise-addr's host with each listener's port, or each listener's
// own address.
type advertisedAddrs struct{ http, grpc, raft, gossip string }

func (c *config) advertised() (advertisedAddrs, error) {
	one := func(flag, bind string) (string, error) {
		host, port, err := net.SplitHostPort(bind)
		if err != nil {
			return "", fmt.Errorf("--%s=%q: %w", flag, bind, err)
		}
		if c.AdvertiseAddr != "" {
			return net.JoinHostPort(c.AdvertiseAddr, port), nil
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return "", fmt.Errorf("--%s=%q binds every interface: set --advertise-addr to the address other nodes reach this one at", flag, bind)
		}
		return bind, nil
	}
	var a advertisedAddrs
	var err error
	if a.http, err = one("http-addr", c.HTTPAddr); err != nil {
		return a, err
	}
	if a.grpc, err = one("grpc-addr", c.GRPCAddr); err != nil {
		return a, err
	}
	if a.raft, err = one("raft-addr", c.RaftAddr); err != nil {
		return a, err
	}
	a.gossip, err = one("gossip-addr", c.GossipAddr)
	return a, err
}
