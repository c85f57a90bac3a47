// Package grpcapi serves queen-node over gRPC, on one server (NewServer):
//
//   - queen.v1.Queen (queenpb/queen.proto), the public API: the HTTP API's
//     push, pop, ack, transaction, lease, configure, KV and timer contract, plus a
//     server-streaming Consume that renews the leases of what it delivered.
//     Requests are decoded into package request's rules, which the HTTP
//     front end calls too (decode.go), and results converted in one place
//     (convert.go), so the log's types never show in the public API. Each
//     call goes through the same node API as the HTTP front end, which
//     forwards to the leader on a follower.
//   - the internal forwarding service followers use to reach the leader
//     (forward.go, internalpb).
//   - grpc.health.v1.Health (SERVING while the node is ready) and server
//     reflection.
//
// Failures of the public API get the code package request gives their kind
// (publicStatus, errors.go); the forwarding service carries the node's
// errors to the follower and back into the same values (forwardStatus,
// fromForwardStatus).
package grpcapi
