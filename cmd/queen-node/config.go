package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/streams"
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
	PartitionCleanup        time.Duration
	SnapshotThreshold       uint64
	RaftLog                 string
	SnapshotInterval        time.Duration
	LogLevel                string
	Pprof                   bool
	TrustTenantHeader       bool
	RaftGroups              int
	IdempotencyTTL          time.Duration
	KVReadRate              float64
	Streams                 request.StreamLimits
	TimerTick               time.Duration
	MaxInflight             int
	MinFreeDiskMB           uint64
	ScrubRateMB             float64
	ScrubInterval           time.Duration
	JWT                     auth.Config
	TLSCert, TLSKey         string
	GossipKeyring           string
	EncryptionKeys          string
	PeerTLSCert, PeerTLSKey string
	PeerTLSCA               string
	RequireSecure           bool
	TestHooks               bool
	Kafka                   kafkaConfig

	retentionMs, timerTickMs int // the ms flags, before they become durations
}

// The flags, in one table: each is a typed Go flag (a boolean flag alone
// turns it on, --pprof=false turns it off; -h shows each flag's type and
// default), read from its QUEEN_ environment variable when it is not on the
// command line, and checked after parsing.
func (c *config) flags(fs *flag.FlagSet) []check {
	fs.StringVar(&c.NodeID, "node-id", "", "this node's id; default: the hostname")
	fs.StringVar(&c.DataDir, "data-dir", "./queen-data", "where the Raft log and the state live")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:6632", "address of the Queen HTTP API")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", "127.0.0.1:6633", "address of the gRPC API and the internal forwarding service")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:6634", "address of the Raft transport")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:6635", "address of the gossip (memberlist) listener")
	fs.Func("join", "comma-separated `list` of the gossip addresses of other nodes", func(v string) error {
		c.Join = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.Join = append(c.Join, a)
			}
		}
		return nil
	})
	fs.StringVar(&c.AdvertiseAddr, "advertise-addr", "", "host name or IP other nodes reach this one at, with the ports of the *-addr flags; default: the host of each *-addr (which then must not be 0.0.0.0)")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 1, "voters to wait for before bootstrapping the cluster")
	fs.StringVar(&c.DefaultSubscriptionMode, "default-subscription-mode", "new", "where a new consumer group starts when the pop does not say: new | all")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 16<<20, "largest request body accepted")
	fs.IntVar(&c.retentionMs, "retention-interval-ms", 2000, "period of the leader's sweep and retention entries (expired leases, KV, deleted queues, retention and eviction of messages), in ms")
	fs.DurationVar(&c.PartitionCleanup, "partition-cleanup", 7*24*time.Hour, "remove a partition that has held no message for this long (its id is never reused); 0 = never")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 262144, "log entries between snapshots (snapshots are also taken every 256 MiB of log, or half the state's size)")
	fs.StringVar(&c.RaftLog, "raft-log", "wal", "where the Raft log lives: wal (hashicorp/raft-wal: one fsync per append) | bolt (raft-boltdb's raft.db); a data dir whose log is in the other is moved at start")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", 60*time.Second, "how often to check whether a snapshot is due")
	fs.DurationVar(&c.IdempotencyTTL, "idempotency-ttl", 24*time.Hour, "how long an Idempotency-Key's first answer is kept")
	fs.Float64Var(&c.KVReadRate, "kv-read-rate", 200, "KV reads per second on this node outside transactions (burst twice that); 0 = unlimited")
	fs.IntVar(&c.Streams.MaxOps, "streams-max-ops", streams.DefaultMaxOps, "state operations one stream cycle may carry (spec §4.16); more is 400")
	fs.IntVar(&c.Streams.MaxPushes, "streams-max-pushes", streams.DefaultMaxPushes, "sink pushes one stream cycle may carry")
	fs.IntVar(&c.Streams.MaxValueBytes, "streams-max-value-bytes", streams.DefaultMaxValueBytes, "bytes of one stream state value")
	fs.IntVar(&c.Streams.MaxKeys, "streams-max-keys", streams.DefaultMaxKeys, "state rows one stream query may hold per source partition")
	fs.IntVar(&c.timerTickMs, "timer-tick-ms", 50, "how often the leader looks for due timers, in ms")
	fs.IntVar(&c.MaxInflight, "max-inflight", 1024, "writes this node holds in flight (proposed or forwarded, waiting for their entry); beyond them a write is answered 429 overloaded with Retry-After")
	fs.Uint64Var(&c.MinFreeDiskMB, "min-free-disk-mb", 256, "below this many MiB free on the data disk, writes that add data are answered 507 storage_full; below half of it apply pauses until space is freed; 0 = no checks")
	fs.Float64Var(&c.ScrubRateMB, "scrub-rate-mb", 4, "MiB per second the background scrub reads of the message files to check every record against its checksum (from the start, then a pass every --scrub-interval); 0 = no scrub")
	fs.DurationVar(&c.ScrubInterval, "scrub-interval", time.Hour, "pause between the end of one scrub pass and the next")
	c.jwtFlags(fs)
	kafkaChecks := c.Kafka.flags(fs)
	fs.StringVar(&c.TLSCert, "tls-cert", "", "certificate file (PEM) of the HTTP and gRPC APIs; with --tls-key both serve TLS, rereading the pair when it changes or on SIGHUP")
	fs.StringVar(&c.TLSKey, "tls-key", "", "private key file (PEM) of --tls-cert")
	fs.StringVar(&c.PeerTLSCert, "peer-tls-cert", "", "this node's certificate (PEM) for mutual TLS with the other nodes on Raft and forwarding (and TLS on the gRPC port)")
	fs.StringVar(&c.PeerTLSKey, "peer-tls-key", "", "private key (PEM) of --peer-tls-cert")
	fs.StringVar(&c.PeerTLSCA, "peer-tls-ca", "", "the cluster CA (PEM): every node's peer certificate must be signed by it")
	fs.StringVar(&c.EncryptionKeys, "encryption-keys", "", "file of named 256-bit keys (a name and a base64 key per line, oldest first): queues with encryptionEnabled are encrypted at rest with the newest (AES-256-GCM); reread on SIGHUP")
	fs.StringVar(&c.GossipKeyring, "gossip-keyring", "", "file of base64 gossip keys (16, 24 or 32 bytes), one per line; the first encrypts, all decrypt; reread on SIGHUP")
	fs.BoolVar(&c.RequireSecure, "require-secure", false, "refuse to start when a listener is beyond loopback without JWT or without TLS")
	fs.BoolVar(&c.TestHooks, "test-hooks", false, "serve /debug/clock-skew and /debug/step-down for fault tests (never in production)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve /debug/pprof/ on the HTTP address")
	fs.IntVar(&c.RaftGroups, "raft-groups", 1, "Raft groups every node runs (each with its own log, state and snapshots, over the one Raft port); each tenant lives in one, and the groups' leaders spread over the nodes. Fixed when the data dir is first used: every node of a cluster must run the same number")
	fs.BoolVar(&c.TrustTenantHeader, "trust-tenant-header", false, "read a request's tenant from its x-queen-tenant header (gRPC metadata) when its token has no tenant claim: only behind a proxy that sets the header; otherwise the header is ignored (logged once)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug | info | warn | error")
	return append(kafkaChecks, []check{
		{"bootstrap-expect", func() error { return atLeast(c.BootstrapExpect, 1) }},
		{"raft-groups", func() error { return within(c.RaftGroups, 1, 64) }},
		{"default-subscription-mode", func() error { return oneOf(c.DefaultSubscriptionMode, "new", "all") }},
		{"max-body-bytes", func() error { return atLeast(c.MaxBodyBytes, 1024) }},
		{"retention-interval-ms", func() error { return atLeast(c.retentionMs, 10) }},
		{"partition-cleanup", func() error { return atLeast(c.PartitionCleanup, 0) }},
		{"snapshot-threshold", func() error { return atLeast(c.SnapshotThreshold, 1) }},
		{"raft-log", func() error { return oneOf(c.RaftLog, "wal", "bolt") }},
		{"snapshot-interval", func() error { return atLeast(c.SnapshotInterval, 10*time.Millisecond) }},
		{"idempotency-ttl", func() error { return atLeast(c.IdempotencyTTL, time.Second) }},
		{"kv-read-rate", func() error { return atLeast(c.KVReadRate, 0) }},
		// flags raise the limits; a lower one would refuse what a runtime sends
		{"streams-max-ops", func() error { return atLeast(c.Streams.MaxOps, streams.DefaultMaxOps) }},
		{"streams-max-pushes", func() error { return atLeast(c.Streams.MaxPushes, streams.DefaultMaxPushes) }},
		{"streams-max-value-bytes", func() error { return within(c.Streams.MaxValueBytes, streams.DefaultMaxValueBytes, 8<<20) }},
		{"streams-max-keys", func() error { return within(c.Streams.MaxKeys, streams.DefaultMaxKeys, 1<<31-1) }},
		{"timer-tick-ms", func() error { return atLeast(c.timerTickMs, 1) }},
		{"max-inflight", func() error { return atLeast(c.MaxInflight, 1) }},
		{"scrub-rate-mb", func() error { return atLeast(c.ScrubRateMB, 0) }},
		{"scrub-interval", func() error { return atLeast(c.ScrubInterval, time.Second) }},
		{"peer-tls-cert", func() error {
			if (c.PeerTLSCert == "") != (c.PeerTLSKey == "") || (c.PeerTLSCert == "") != (c.PeerTLSCA == "") {
				return errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together")
			}
			return nil
		}},
		{"tls-cert", func() error {
			if (c.TLSCert == "") != (c.TLSKey == "") {
				return errors.New("--tls-cert and --tls-key go together")
			}
			return nil
		}},
		{"log-level", func() error { return oneOf(c.LogLevel, "debug", "info", "warn", "error") }},
	}...)
}

// check validates one flag's value after parsing.
type check struct {
	flag string
	ok   func() error
}

func within(v, lowest, highest int) error {
	if v < lowest || v > highest {
		return fmt.Errorf("must be from %d to %d", lowest, highest)
	}
	return nil
}

func atLeast[T int | int64 | uint64 | float64 | time.Duration](v, lowest T) error {
	if v < lowest {
		return fmt.Errorf("must be at least %v", lowest)
	}
	return nil
}

func oneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "QUEEN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// aliases are older spellings still honoured (0.15 names), and the JWT_*
// variables of spec §4.17, read when the QUEEN_ one is not set.
var aliases = map[string]string{"default-subscription-mode": "DEFAULT_SUBSCRIPTION_MODE"}

func init() {
	for _, name := range jwtFlagNames {
		aliases[name] = strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	}
}

// jwtFlagNames are the JWT flags; each is also JWT_<NAME> (spec §4.17).
var jwtFlagNames = []string{"jwt-enabled", "jwt-algorithm", "jwt-secret", "jwt-public-key", "jwt-jwks-url", "jwt-jwks-file",
	"jwt-issuer", "jwt-audience", "jwt-clock-skew", "jwt-skip-paths", "jwt-roles-claim", "jwt-roles-array-claim",
	"jwt-role-admin", "jwt-role-read-write", "jwt-role-read-only", "jwt-role-write-only"}

func (c *config) jwtFlags(fs *flag.FlagSet) {
	j := &c.JWT
	fs.BoolVar(&j.Enabled, "jwt-enabled", false, "require a JWT on every route but the public ones (spec §4.17)")
	fs.StringVar(&j.Algorithm, "jwt-algorithm", "auto", "HS256 | RS256 | EdDSA | auto (every algorithm a key is given for)")
	fs.StringVar(&j.Secret, "jwt-secret", "", "HS256 secret")
	fs.StringVar(&j.PublicKey, "jwt-public-key", "", "RS256 or EdDSA public key: PEM text, or the path of a PEM file")
	fs.StringVar(&j.JWKSURL, "jwt-jwks-url", "", "JWKS URL, fetched at start and every 5 minutes")
	fs.StringVar(&j.JWKSFile, "jwt-jwks-file", "", "JWKS file, reread when it changes")
	fs.StringVar(&j.Issuer, "jwt-issuer", "", "required iss; empty = any")
	fs.StringVar(&j.Audience, "jwt-audience", "", "required aud; empty = any")
	fs.Func("jwt-clock-skew", "leeway for exp, nbf and iat: seconds, or a Go duration (default 30)", func(v string) error {
		if n, err := strconv.Atoi(v); err == nil {
			j.ClockSkew = time.Duration(n) * time.Second
			return nil
		}
		d, err := time.ParseDuration(v)
		j.ClockSkew = d
		return err
	})
	fs.Func("jwt-skip-paths", "comma-separated paths served without a token, matched exactly (default /health,/metrics/prometheus,/metrics,/)", func(v string) error {
		j.SkipPaths = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&j.RolesClaim, "jwt-roles-claim", "role", "claim holding one role (a string)")
	fs.StringVar(&j.RolesArrayClaim, "jwt-roles-array-claim", "roles", "claim holding roles (an array)")
	fs.StringVar(&j.RoleAdmin, "jwt-role-admin", "admin", "name of the admin role")
	fs.StringVar(&j.RoleReadWrite, "jwt-role-read-write", "read-write", "name of the read-write role")
	fs.StringVar(&j.RoleReadOnly, "jwt-role-read-only", "read-only", "name of the read-only role")
	fs.StringVar(&j.RoleWriteOnly, "jwt-role-write-only", "write-only", "name of the producer-only role (push and timer schedule only)")
}

// parseConfig reads flags, then the environment for flags not given.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("queen-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	checks := c.flags(fs)
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " [" + envName(f.Name) + "]" })
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: queen-node [flags]\n\nEvery flag can also be set by the environment variable named after it.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (a boolean flag takes its value as --flag=false)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			if alias, has := aliases[f.Name]; has {
				name = alias
				v, ok = os.LookupEnv(alias)
			}
		}
		if ok && v != "" { // an empty variable is as good as unset
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for _, ch := range checks {
		if cerr := ch.ok(); cerr != nil {
			return nil, fmt.Errorf("--%s=%s: %w", ch.flag, fs.Lookup(ch.flag).Value, cerr)
		}
	}
	c.RetentionInterval = time.Duration(c.retentionMs) * time.Millisecond
	c.TimerTick = time.Duration(c.timerTickMs) * time.Millisecond
	if c.KVReadRate == 0 {
		c.KVReadRate = -1 // unlimited
	}
	if c.NodeID == "" {
		h, herr := os.Hostname()
		if herr != nil || h == "" {
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
