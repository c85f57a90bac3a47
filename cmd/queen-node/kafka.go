package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/kafka"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/tenant"
	"github.com/queen-node/queen-node/tlsfiles"
)

// kafkaConfig is the Kafka listener's part of the command line.
type kafkaConfig struct {
	Addr, Advertised string
	TLSCert, TLSKey  string
	Trusted          bool
	Limits           kafka.Limits
}

func (k *kafkaConfig) flags(fs *flag.FlagSet) []check {
	fs.StringVar(&k.Addr, "kafka-addr", "", "address of the Kafka protocol listener (e.g. 127.0.0.1:9092); empty = off")
	fs.StringVar(&k.Advertised, "kafka-advertised-addr", "", "host:port Kafka clients reconnect to (Metadata, FindCoordinator); default: --advertise-addr's host with --kafka-addr's port, or --kafka-addr")
	fs.StringVar(&k.TLSCert, "kafka-tls-cert", "", "certificate (PEM) of the Kafka listener; default: --tls-cert's pair when it is set")
	fs.StringVar(&k.TLSKey, "kafka-tls-key", "", "private key (PEM) of --kafka-tls-cert")
	fs.BoolVar(&k.Trusted, "kafka-trusted-network", false, "with JWT on, let Kafka clients in without SASL (the network is trusted); otherwise the listener needs SASL PLAIN/OAUTHBEARER with a queen-node JWT")
	fs.IntVar(&k.Limits.DefaultPartitions, "kafka-default-partitions", 1, "partitions of a topic made on first use (CreateTopics names its own)")
	fs.BoolVar(&k.Limits.NoAutoCreate, "kafka-no-auto-create", false, "a produce or metadata request naming a missing topic does not make it")
	fs.DurationVar(&k.Limits.ProducerIdle, "kafka-producer-idle", 24*time.Hour, "a Kafka producer's id, epoch and sequences are kept this long after its last batch")
	fs.IntVar(&k.Limits.MaxProducers, "kafka-max-producers", 100_000, "Kafka producer states kept; past it the least recently used goes")
	fs.IntVar(&k.Limits.TxnMaxRecords, "kafka-txn-max-records", 100_000, "records one Kafka transaction may stage")
	fs.IntVar(&k.Limits.TxnMaxBytes, "kafka-txn-max-bytes", 8<<20, "bytes one Kafka transaction may stage (its commit is one log entry)")
	fs.IntVar(&k.Limits.OpenTxnMaxBytes, "kafka-open-txn-max-bytes", 256<<20, "bytes every open Kafka transaction together may stage on the leader")
	return []check{
		{"kafka-tls-cert", func() error {
			if (k.TLSCert == "") != (k.TLSKey == "") {
				return errors.New("--kafka-tls-cert and --kafka-tls-key go together")
			}
			return nil
		}},
		{"kafka-default-partitions", func() error { return within(k.Limits.DefaultPartitions, 1, 10_000) }},
		{"kafka-producer-idle", func() error { return atLeast(k.Limits.ProducerIdle, time.Minute) }},
		{"kafka-max-producers", func() error { return atLeast(k.Limits.MaxProducers, 1) }},
		{"kafka-txn-max-records", func() error { return atLeast(k.Limits.TxnMaxRecords, 1) }},
		{"kafka-txn-max-bytes", func() error { return within(k.Limits.TxnMaxBytes, 1024, 64<<20) }},
		{"kafka-open-txn-max-bytes", func() error { return atLeast(k.Limits.OpenTxnMaxBytes, k.Limits.TxnMaxBytes) }},
	}
}

// advertisedKafka is where clients reconnect to: never a wildcard, always
// with a port.
func (c *config) advertisedKafka() (string, error) {
	k := c.Kafka
	adv := k.Advertised
	if adv == "" {
		_, port, err := net.SplitHostPort(k.Addr)
		if err != nil {
			return "", fmt.Errorf("--kafka-addr=%q: %w", k.Addr, err)
		}
		adv = k.Addr
		if c.AdvertiseAddr != "" {
			adv = net.JoinHostPort(c.AdvertiseAddr, port)
		}
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("--kafka-advertised-addr=%q: clients need a host and a port to reconnect to", adv)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("--kafka-advertised-addr=%q is a wildcard: clients cannot reconnect to it; set --kafka-advertised-addr (or --advertise-addr)", adv)
	}
	return adv, nil
}

// kafkaListener listens on --kafka-addr (nil when it is off) and checks
// what the listener needs before the node starts.
func kafkaListener(c *config, verifier *auth.Verifier) (net.Listener, string, error) {
	if c.Kafka.Addr == "" {
		return nil, "", nil
	}
	adv, err := c.advertisedKafka()
	if err != nil {
		return nil, "", err
	}
	if verifier != nil && c.Kafka.Trusted {
		slog.Warn("kafka: JWT is on but --kafka-trusted-network lets Kafka clients in without SASL")
	}
	ln, err := net.Listen("tcp", c.Kafka.Addr)
	if err != nil {
		return nil, "", fmt.Errorf("kafka listener: %w", err)
	}
	return ln, adv, nil
}

// kafkaTLS is the listener's TLS: its own pair, or the node's.
func kafkaTLS(c *config, certs *tlsfiles.Pair) (*tls.Config, error) {
	if c.Kafka.TLSCert != "" {
		pair, err := tlsfiles.Load(c.Kafka.TLSCert, c.Kafka.TLSKey, slog.Default())
		if err != nil {
			return nil, err
		}
		return pair.ServerConfig(), nil
	}
	if certs != nil {
		return certs.ServerConfig(), nil
	}
	return nil, nil
}

// startKafka serves the Kafka protocol on ln through the node's one write
// pipeline; every call goes to the Raft group of its tenant (node routes
// it, as for HTTP and gRPC).
func startKafka(c *config, ln net.Listener, adv string, node *cluster.Groups, verifier *auth.Verifier, tlsCfg *tls.Config,
	reg *prometheus.Registry, log *slog.Logger) *kafka.Server {
	metrics := kafka.NewMetrics(reg)
	metrics.WatchProducers(reg, func() float64 {
		var n uint64
		for _, t := range node.Tenants() { // every tenant's producers
			_ = node.Read(tenant.With(context.Background(), t), cluster.Stale, func(rd *fsm.Reader) error { n += rd.KafkaProducers(); return nil })
		}
		return float64(n)
	})
	srv := kafka.New(kafka.Config{
		Node: node, Pipeline: pipeline.New(pipeline.Config{Node: node, Logger: log, Front: "kafka"}), Logger: log.With("component", "kafka"),
		Advertised: adv, TLS: tlsCfg, Auth: verifier, Trusted: c.Kafka.Trusted, Limits: c.Kafka.Limits, Metrics: metrics,
	})
	go func() {
		if err := srv.Serve(ln); err != nil {
			log.Error("kafka listener stopped", "err", err)
		}
	}()
	log.Info("kafka listener started", "addr", c.Kafka.Addr, "advertised", adv, "tls", tlsCfg != nil, "sasl", verifier != nil && !c.Kafka.Trusted)
	return srv
}
