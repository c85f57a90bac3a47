// Command fuzzhttp fuzzes a running queen-node over HTTP: bad input from
// outside, against the real binary. It builds queen-node (or takes -bin or
// $QN_BIN), starts one node through nodeproc with JWT on (HS256, an issuer
// and an audience, so that tokens matter) and a 256 KiB body limit (so that
// 413 is reachable), and sends it requests for -n requests or -duration,
// one at a time, then prints a summary and exits 1 on any failure.
//
//	go run ./scripts/fuzzhttp -duration 60s -seed 42
//	go run ./scripts/fuzzhttp -n 5000 -seed 7 -v     # every request and its answer
//
// # The requests
//
// Every route of the API, taken from the httpapi router itself
// (httpapi.New(...).Routes()), has a request of the spec's shape
// (http-api.md, the 2.x addendum): path parameters, query and JSON body,
// filled from what the node answered before, so that they reach real state
// (partition ids from pushes, leases and transaction ids from pops, the
// messages pushes, pops and the message views named, dead letters by the
// dlqId of GET /api/v1/dlq rows, trace names recorded or listed, lock
// permits with their tokens, KV versions, timer keys, a backup the node
// served). About one request in four is such a valid request with a token
// whose role reaches the route (pushes, pops, acks and transactions under
// real leases, KV writes, timers, locks, configure, seeks, queue and group
// deletions, traces, message reads, dead-letter replays and purges of one
// queue, the operator's switches, which are put back a few requests later),
// so that there is state to damage. The others start from a route's shape and are mutated, one to
// three times:
//
//   - the JSON tree: a member dropped, repeated (a duplicate name) or added
//     (server-owned names such as producerSub), a value of another type,
//     huge, negative and odd numbers (1e400, 2^63, -0, 0x10), odd strings
//     (NUL, RTL, combining marks, reserved names), strings that are not
//     UTF-8 or hold lone surrogates, long strings, nesting 64 to 100000
//     deep, empty and repeated arrays;
//   - the bytes: cut short, emptied, replaced, random, a BOM, trailing
//     garbage, the body twice, past the body limit;
//   - the query (bad numbers and booleans, repeated names, bad escapes),
//     the path (parameters replaced by odd, long, raw or escaped values,
//     segments added, random paths), the method (PATCH, TRACE, lower case,
//     unknown ones), the Idempotency-Key (new, reused with another body,
//     too long, not printable, empty), chunked bodies and content types;
//
// and each carries one kind of Authorization header: none, garbage, another
// scheme, a bad signature, another secret, alg none, expired, not valid
// yet, wrong issuer or audience, a huge token, a token without a role or
// with an unknown one, odd claims, a scoped token, and tokens of each role
// (read-only, write-only, read-write, admin; also as roles[], without the
// Bearer prefix, with it in lower case). Half of the fuzzed requests carry a
// token that reaches the route, so that bad input meets the handlers.
//
// The stream of requests is a function of -seed and of what the node
// answered (lease ids, partition ids): the same seed makes the same choices
// in the same order, and a run with -n stops after the same requests.
//
// # The checks
//
// Each failure is printed with the request (route, token kind, mutations),
// the answer and a curl command that sends it again (a long body or one
// holding NUL goes to a file beside the node's log); the node's data dir
// and log are kept.
//
//   - crash: the process never exits, and /health answers 200 (polled every
//     second and after any request without an answer; a 503 is given 10 s);
//     the node's log holds no panic (a handler panic recovered into a 500
//     included). A request with no answer (connection closed, or none in
//     30 s) is a failure too, except a long-poll pop, which the fuzzer cuts
//     after 2.5 s (closing the connection cancels it), and a request that
//     net/http itself refuses at the protocol level (a request line or
//     header it cannot parse: its plain-text 400, or a reset), or a body
//     past 256 KiB that net/http stops reading.
//   - 5xx: none, except the documented 503s: a JSON body with "error" and a
//     "code" among no_leader, retry, outcome_unknown, timeout, shutting_down
//     (request/errors.go: the engine's Unavailable errors; spec §1.2,
//     addendum §4.9), kv_disabled on the KV routes and POST /api/v1/locks
//     (permits are KV rows; the KV switch stops locks), timers_disabled on
//     POST /api/v1/timers (the operator's switches, request/verdicts.go;
//     spec §4.7, addendum §2 and §4.4), each with a Retry-After; and 503
//     from /health (unhealthy or settling, spec §4.13, addendum §4.13),
//     which the liveness check watches. A 500 (internal, or a recovered
//     panic) is always a failure; 507 storage_full cannot happen (the node
//     runs with --min-free-disk-mb 0), nor can any other 5xx.
//   - no write on a 4xx: for a 4xx answer, the state hash (GET
//     /api/v1/system/state-hash with an admin token: every bucket of the
//     state file, the applied index included, and every message) is the
//     same before and after. The node writes entries of its own (sweeps and
//     retention every 2 s, timer steps every 50 ms), so a moved hash is
//     looked at again as the auth matrices do (authtest.Unchanged): the
//     request is sent again until a window shows no change, five windows at
//     most; a request that writes moves the hash in every one. Reading the
//     hash costs a call or two, so the candidates are a sample: every
//     fuzzed request to a route that may write (any method but GET, HEAD
//     and OPTIONS, and the pops), one valid request in four of those, and
//     one in -read-sample (8) of the rest (reads, unknown routes), up to
//     -max-checks (0 = no bound). Not compared: a refusal of a request
//     with a valid Idempotency-Key on a route that takes one (push, kv,
//     timers, transaction, locks), which the node stores under the key by design,
//     so that a retry gets the same answer (package idempotency).
//   - error bodies: every 4xx and 5xx answer (but to HEAD) is a JSON
//     object with an "error" string (spec §1.1); a 2xx answer of the API
//     is JSON (204 and HEAD: no body; the Prometheus text and the backup
//     file apart).
//   - auth: on a route that is not public, an invalid token is answered
//     401 and a valid one whose role does not reach the route 403 (spec
//     §3, §4.17; the levels are pipeline.RouteAccess, judged by
//     authtest.Allows), whatever else is wrong with the request.
//
// -known (repeatable) names a finding already reported, as kind@route,
// optionally followed by the answer's status and "code": "write on a
// 4xx@POST /api/v1/transaction 403 kv_disabled". Such a failure is printed
// once and counted, and does not fail the run.
//
// The summary line gives the requests sent (valid ones apart), the answers
// by class, the documented 503s, the 4xx compared for writes (and the keyed
// refusals not compared), the auth answers checked, the long-polls cut and
// the failures by kind; a second line gives every status and the time spent
// reading the state hash.
package main
