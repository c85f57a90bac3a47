// Package grpcapi serves queen-node over gRPC, on one server (NewServer):
//
//   - queen.v1.Queen (queenpb/queen.proto), the public API: the HTTP API's
//     push, pop, ack, transaction, lease, configure and KV contract, plus a
//     server-streaming Consume that renews the leases of what it delivered.
//     Requests are validated with the HTTP API's rules (validate.go,
//     validate_kv.go) and results converted in one place (convert.go), so
//     the state machine's types never show in the public API. Each call
//     goes through the same node API as the HTTP front end, which forwards
//     to the leader on a follower.
//   - the internal forwarding service followers use to reach the leader
//     (forward.go, internalpb).
//   - grpc.health.v1.Health (SERVING while the node is ready) and server
//     reflection.
//
// Errors become gRPC codes in one function, ToStatus (errors.go); the
// forwarding client reads them back with FromStatus.
package grpcapi
