// Package placement is a deterministic model of replica and leader placement
// for running tenants on several Raft groups whose voters are R of the
// cluster's nodes: initial placement, replacement of a dead node's replicas,
// replica and leader rebalancing, and moving a tenant to another group.
//
// It is used to reason about and test the design (DESIGN.md) in a
// simulation with no real Raft; it is not yet wired into the broker. Every
// choice breaks ties by node ID and walks groups in ID order, so the same
// input always gives the same placement and the same move counts.
package placement
