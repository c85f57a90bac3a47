// Package grpcapi serves queen-node over gRPC: the internal forwarding
// service that followers use to reach the leader (forward.go), and the
// public API (issue 7). Cluster errors map to gRPC codes in one place
// (errors.go), in both directions.
package grpcapi
