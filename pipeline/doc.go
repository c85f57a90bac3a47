// Package pipeline is the one path every front end's call takes to the
// node (HTTP and gRPC today; any later front end calls it too), so that
// what a call may do and how its write is made is decided in one place:
//
//   - the access table (access.go): the level every HTTP route and gRPC
//     method needs, checked at the door;
//   - authorisation of the command itself (authorize.go): its kind must be
//     a client's (fsm.Kind.Origin), the caller's role must reach it
//     (Kind.Access), and a token scoped to some queues must reach every
//     queue, partition, lease and namespace it touches, riders of a
//     transaction included (Kind.Touches); a command whose names cannot be
//     listed, or that spans every queue, is refused to a scoped token;
//   - stamping (the actor the audit trail records, producerSub on every
//     message the command appends: Kind.Payloads);
//   - the Idempotency-Key: a refusal of the rules is stored under it, and
//     whatever the key answered first is answered again;
//   - the write timeout, apply, the outcome, and the audit log line.
//
// Pops (long-polling writes) and read queries pass the same authorisation.
// The front ends decode their wire into package request's rules and
// shape the result; they never check scopes or levels of a command
// themselves.
package pipeline
