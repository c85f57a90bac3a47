// Package request holds the rules of the public API, once, for both front
// ends (httpapi and grpcapi): for each operation one function turns a
// decoded request into the command the node applies, or into the refusal
// the client gets, with the limits, the server-minted ids and the defaults
// of the spec. A front end keeps only its wire: it decodes its bytes into
// this package's input types (refusing what does not have the right JSON or
// protobuf type), calls the rule, and encodes the result or the *Error.
//
// The package also decides, in one table (errors.go), which status every
// failure gets: a refusal of the rules, an engine error from the node
// (no leader, outcome unknown, ...), an Idempotency-Key conflict, or a
// command's verdict that the API answers as an error (verdicts.go). Each
// Kind names its HTTP status and its gRPC code side by side.
package request
