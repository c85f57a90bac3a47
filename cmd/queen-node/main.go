// Command queen-node runs one node of the broker. With no flags it is a
// complete single-node broker with its data in ./queen-data.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	runtimepprof "runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/dashboard"
	"github.com/queen-node/queen-node/grpcapi"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/tlsfiles"
)

var version = "0.1.0-dev"

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		if sub, ok := subcommands[args[0]]; ok {
			if err := sub(args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
				fmt.Fprintln(os.Stderr, "queen-node "+args[0]+":", err)
				code := 1
				var ec interface{ ExitCode() int } // a usage error of ctl: 2
				if errors.As(err, &ec) {
					code = ec.ExitCode()
				}
				os.Exit(code)
			}
			return
		}
	}
	if err := run(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if errors.Is(err, errResync) {
			restart()
		}
		fmt.Fprintln(os.Stderr, "queen-node:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	// Signals first, so a SIGTERM during startup still shuts down cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)

	cfg, err := parseConfig(args, os.Stderr)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel)
	cfg.JWT.Logger = log
	verifier, err := auth.New(cfg.JWT) // nil with JWT off
	if err != nil {
		return err
	}
	defer verifier.Close()
	warnings := exposure(cfg)
	if len(warnings) > 0 {
		if cfg.RequireSecure {
			return insecureError(warnings)
		}
		log.Error("INSECURE: this node is reachable beyond loopback with " + strings.Join(warnings, "; ") +
			" (set JWT and --tls-cert/--tls-key; --require-secure refuses to start this way)")
	}
	var keys *atrest.Keyring // nil: queues with encryptionEnabled keep plaintext (spec §5.12)
	if cfg.EncryptionKeys != "" {
		if keys, err = atrest.Load(cfg.EncryptionKeys); err != nil {
			return err
		}
	}
	var gossipKeys [][]byte
	if cfg.GossipKeyring != "" {
		if gossipKeys, err = cluster.LoadGossipKeyring(cfg.GossipKeyring); err != nil {
			return err
		}
	}
	var peer *tlsfiles.Peer
	var peerClient *tls.Config
	if cfg.PeerTLSCert != "" {
		if peer, err = tlsfiles.LoadPeer(cfg.PeerTLSCert, cfg.PeerTLSKey, cfg.PeerTLSCA, log); err != nil {
			return err
		}
		peerClient = peer.ClientConfig()
	}
	var certs *tlsfiles.Pair
	if cfg.TLSCert != "" {
		if certs, err = tlsfiles.Load(cfg.TLSCert, cfg.TLSKey, log); err != nil {
			return err
		}
		if peerClient == nil { // the gRPC port serves the public pair: nodes dial it with TLS
			peerClient = certs.ClientConfig()
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	adv, err := cfg.advertised()
	if err != nil {
		return err
	}

	// Listen before starting the node, so a taken port fails fast.
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	if certs != nil {
		httpLn = tls.NewListener(httpLn, certs.ServerConfig())
	}
	grpcLn, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("grpc listener: %w", err)
	}

	kafkaLn, kafkaAdv, err := kafkaListener(cfg, verifier)
	if err != nil {
		httpLn.Close()
		grpcLn.Close()
		return err
	}
	kafkaTLSCfg, err := kafkaTLS(cfg, certs)
	if err != nil {
		return err
	}

	resync := make(chan struct{}, 1)
	node, err := cluster.StartGroups(cluster.Config{
		OnResync: func() {
			select {
			case resync <- struct{}{}:
			default:
			}
		},
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftAddr: cfg.RaftAddr, RaftAdvertise: adv.raft,
		BootstrapExpect: cfg.BootstrapExpect, Logger: log, Registry: reg,
		GossipAddr: cfg.GossipAddr, GossipAdvertise: adv.gossip, Join: cfg.Join,
		HTTPAdvertise: adv.http, GRPCAdvertise: adv.grpc, KafkaAdvertise: kafkaAdv,
		SweepInterval: cfg.RetentionInterval, PartitionIdle: cfg.PartitionCleanup, TimerTick: cfg.TimerTick,
		BootID: testBootID(cfg), MaxInflight: cfg.MaxInflight, MinFreeDisk: cfg.MinFreeDiskMB << 20,
		ScrubRate: cfg.ScrubRateMB * (1 << 20), ScrubInterval: cfg.ScrubInterval, GossipKeys: gossipKeys, PeerTLS: peer, Keys: keys,
		Tuning: raftlog.Tuning{SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval}, RaftLog: cfg.RaftLog,
	}, cfg.RaftGroups)
	if err != nil {
		httpLn.Close()
		grpcLn.Close()
		return err
	}
	forward := grpcapi.NewForwardClient(peerClient)
	defer forward.Close()
	node.SetForwarder(forward.ForGroup)

	// The gRPC server: the internal forwarding service, the public API
	// (queen.v1), health and reflection.
	// One set of request rules for both front ends, so that per-node limits
	// (the KV read rate) hold across them.
	rules := request.New(request.Options{DefaultSubscriptionMode: cfg.DefaultSubscriptionMode,
		KVReadRate: cfg.KVReadRate, IdempotencyTTL: cfg.IdempotencyTTL, Streams: cfg.Streams})
	grpcOpts := []grpcapi.Option{grpcapi.WithRules(rules), grpcapi.WithAuth(verifier), grpcapi.WithLogger(log.With("component", "grpc")),
		grpcapi.WithTrustedTenantHeader(cfg.TrustTenantHeader)}
	switch {
	case peer != nil:
		grpcOpts = append(grpcOpts, grpcapi.WithPeerTLS(peer.SharedServerConfig(certs), peer.Verified))
	case certs != nil:
		grpcOpts = append(grpcOpts, grpcapi.WithTLS(certs.ServerConfig()))
	}
	grpcSrv := grpcapi.NewServer(node, grpcOpts...)
	go grpcSrv.Serve(grpcLn)

	var statusPeers *tls.Config // the status views read the other nodes' /health over HTTPS when the API serves it
	if certs != nil {
		statusPeers = certs.ClientConfig()
	}
	api := httpapi.New(httpapi.Config{
		Backend: node, Logger: log, Registry: reg, MaxBodyBytes: cfg.MaxBodyBytes, Rules: rules, Version: version,
		Auth: verifier, SecurityWarnings: warnings, PeerTLS: statusPeers, TrustTenantHeader: cfg.TrustTenantHeader,
	})
	var handler http.Handler = api
	if cfg.Pprof || cfg.TestHooks {
		mux := http.NewServeMux()
		if cfg.Pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		if cfg.TestHooks {
			log.Warn("test hooks are on: /debug/clock-skew and /debug/step-down change this node's behaviour")
			testHooks(mux, node)
		}
		mux.Handle("/", api)
		handler = mux
	}
	handler = dashboard.Wrap(handler) // the operator's dashboard at /dashboard (static; its API calls carry the token)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(httpLn) }()
	var kafkaSrv interface{ Close() error }
	if kafkaLn != nil {
		kafkaSrv = startKafka(cfg, kafkaLn, kafkaAdv, node, verifier, kafkaTLSCfg, reg, log)
	}
	log.Info("queen-node started", "node", cfg.NodeID, "http", cfg.HTTPAddr, "raft", cfg.RaftAddr, "data", cfg.DataDir)

	restarting := false
wait:
	for {
		select {
		case <-resync:
			log.Warn("restarting this node to rebuild its damaged state from the leader")
			restarting = true
			break wait
		case s := <-sigs:
			if s == syscall.SIGHUP {
				reload(log, certs, peer, keys, cfg.GossipKeyring, node.Group(0))
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break wait
		case err := <-serveErr:
			log.Error("http server stopped", "err", err)
			break wait
		}
	}
	slow := time.AfterFunc(shutdownStackAfter, func() { dumpStacks(log) })
	defer slow.Stop()
	node.Drain() // long-polls answer 204 now, and a leader hands leadership over while the servers still run
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	grpcSrv.GracefulStop()
	if kafkaSrv != nil {
		kafkaSrv.Close()
	}
	if err := node.Shutdown(); err != nil {
		return fmt.Errorf("node shutdown: %w", err)
	}
	log.Info("stopped")
	if restarting {
		return errResync
	}
	return nil
}

// shutdownStackAfter is how long a stop may take before the log gets every
// goroutine's stack: a stop that hangs (a jepsen run of 2026-12-07, seed
// 20261213: a node restarting to resync never finished stopping its
// groups) leaves the reason where the operator looks.
const shutdownStackAfter = 30 * time.Second

func dumpStacks(log *slog.Logger) {
	log.Error("stopping has taken over " + shutdownStackAfter.String() + ": every goroutine's stack follows on stderr")
	runtimepprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
}

// errResync: run stopped so that the process starts again and rebuilds its
// state from the leader (cluster/resync.go).
var errResync = errors.New("restarting to resync")

// restart replaces this process with a fresh run of the same program and
// arguments (same PID, so a supervisor or a test that watches it is not
// disturbed); it returns only if that fails.
func restart() {
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, os.Environ())
	}
	fmt.Fprintln(os.Stderr, "queen-node: restart for the resync failed; start the node again:", err)
	os.Exit(1)
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// reload is SIGHUP: the TLS pairs, the encryption keys and the gossip
// keyring are reread; what does not load keeps what was loaded before.
func reload(log *slog.Logger, certs *tlsfiles.Pair, peer *tlsfiles.Peer, keys *atrest.Keyring, keyring string, node *cluster.Node) {
	if keys != nil {
		if err := keys.Reload(); err != nil {
			log.Error("SIGHUP: the encryption keys do not load; keeping the keys loaded before", "err", err)
		} else {
			log.Info("SIGHUP: reloaded the encryption keys", "newest", keys.Newest())
		}
	}
	if peer != nil {
		if err := peer.Reload(); err != nil {
			log.Error("SIGHUP: the peer certificate or the cluster CA does not load; keeping what was loaded before", "err", err)
		} else {
			log.Info("SIGHUP: reloaded the peer certificate and the cluster CA")
		}
	}
	if certs != nil {
		if err := certs.Reload(); err != nil {
			log.Error("SIGHUP: the TLS certificate does not load; serving the one loaded before", "err", err)
		} else {
			log.Info("SIGHUP: reloaded the TLS certificate")
		}
	}
	if keyring != "" {
		keys, err := cluster.LoadGossipKeyring(keyring)
		if err == nil {
			err = node.ReloadGossipKeys(keys)
		}
		if err != nil {
			log.Error("SIGHUP: the gossip keyring does not load; keeping the keys loaded before", "err", err)
		} else {
			log.Info("SIGHUP: reloaded the gossip keyring", "keys", len(keys))
		}
	}
}
