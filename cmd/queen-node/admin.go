package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/queen-node/queen-node/backup"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/ctl"
)

// The operator's subcommands (README, "Operations"):
//
//	queen-node backup  --addr URL --out FILE   save a verified backup of a running cluster
//	queen-node restore --addr URL --in FILE    replace a cluster's state with a backup
//	queen-node verify-backup FILE              check a backup file without a cluster
//	queen-node recover [the node's flags]      after losing quorum for good: make this
//	                                           stopped node a one-voter cluster
//	queen-node ctl COMMAND ...                 the operator's command line (package ctl)

// subcommands maps a first argument to its command.
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"backup":        runBackup,
	"restore":       runRestore,
	"verify-backup": runVerifyBackup,
	"recover":       runRecover,
	"ctl":           ctl.Run,
}

func clientFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *time.Duration) {
	fs := flag.NewFlagSet("queen-node "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:6632", "HTTP address of any node of the cluster")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
	return fs, addr, timeout
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

func runBackup(args []string, stdout, stderr io.Writer) error {
	fs, addr, timeout := clientFlags("backup", stderr)
	out := fs.String("out", "", "file to write the backup to (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("backup: --out is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	hs, err := backup.Download(ctx, http.DefaultClient, *addr, *out)
	if err != nil {
		return err
	}
	printJSON(stdout, headersOut(map[string]any{"file": *out}, hs))
	return nil
}

func runRestore(args []string, stdout, stderr io.Writer) error {
	fs, addr, timeout := clientFlags("restore", stderr)
	in := fs.String("in", "", "backup file to restore (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" {
		return fmt.Errorf("restore: --in is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := backup.Upload(ctx, http.DefaultClient, *addr, *in)
	if err != nil {
		return err
	}
	printJSON(stdout, res)
	return nil
}

func runVerifyBackup(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: queen-node verify-backup FILE")
	}
	b, err := backup.Open(args[0])
	if err != nil {
		return err
	}
	defer b.Close()
	printJSON(stdout, headersOut(map[string]any{"file": args[0], "ok": true}, b.Headers()))
	return nil
}

// runRecover takes the node's own flags (or environment), so that it finds
// the same data dir, id and Raft address the node runs with.
func runRecover(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	adv, err := cfg.advertised()
	if err != nil {
		return err
	}
	last, err := cluster.Recover(cluster.Config{NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftAddr: cfg.RaftAddr,
		RaftAdvertise: adv.raft, Logger: newLogger(cfg.LogLevel)})
	if err != nil {
		return err
	}
	printJSON(stdout, map[string]any{"recovered": true, "nodeId": cfg.NodeID, "raftAddr": adv.raft, "lastIndex": last,
		"next": "start this node as before; then start new nodes that --join it"})
	return nil
}

// headersOut adds a backup's header to out, or with several Raft groups
// every record's as "groups".
func headersOut(out map[string]any, hs []backup.Header) map[string]any {
	out["header"] = hs[0]
	if len(hs) > 1 {
		out["groups"] = hs
	}
	return out
}
