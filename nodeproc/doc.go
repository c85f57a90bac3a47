// Package nodeproc runs queen-node as real processes: it builds the binary
// once (or takes a given one), starts nodes on free loopback ports (or on
// addresses the caller picks), kills them with SIGKILL, stops them with
// SIGTERM, pauses them with SIGSTOP, restarts them on the same data dir and
// ports, and reads what they say about themselves (GET /health, GET
// /api/v1/system/cluster as cluster.ClusterView).
//
// A Node is one process at a time on one data dir; a Cluster is N nodes
// that find each other over gossip (--join every gossip address,
// --bootstrap-expect N), with the probes a failover needs: Leader,
// WaitLeader, AwaitNewLeader, WaitVoters, Healthy, and membership changes
// (AddNode, RemoveNode).
//
// The end-to-end tests (e2e/), the fault tests (jepsen/harness) and the
// load generator (scripts/bench) all start their nodes here. What only the
// fault tests need stays theirs and plugs in through Spec: the addresses a
// node listens on (a network namespace's IP), a command the binary runs
// under (ip netns exec), the data dir's location and extra environment, and
// a Prepare hook before every (re)start (mount the node's disk).
//
// Process hygiene: a Node signals only the process it started, through the
// handle it got from starting it (never by name); every wait is bounded;
// each process gets SIGKILL if the program that started it dies
// (Pdeathsig); Cluster.Stop kills every process the cluster started.
package nodeproc
