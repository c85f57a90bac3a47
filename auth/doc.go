// Package auth checks the bearer tokens of the Queen API (spec §4.17,
// addendum §4.11): JWTs signed with HS256, RS256 or EdDSA (go-jose does
// the parsing and the signature; "alg: none" and any algorithm not
// configured are refused), the issuer, audience and clock-skew checks, and
// the roles a token carries. It knows nothing of HTTP or gRPC: a front end
// asks Authenticate for the caller's Identity and Identity.Allows for the
// route's Level.
//
// Roles nest: admin ⊇ read-write ⊇ read-only. write-only is a producer's
// role beside them: it allows the producer routes (push, timer schedule)
// and nothing else, never a pop or an ack.
package auth
