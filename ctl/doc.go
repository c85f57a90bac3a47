// Package ctl is `queen-node ctl`, the operator's command line for a
// queen-node cluster over its HTTP API:
//
//	queen-node ctl queues                               queues with pending, processing, dead letters
//	queen-node ctl groups                               consumer groups with lag and state
//	queen-node ctl dlq --queue orders                   dead letters: error, retries, failed at
//	queen-node ctl dlq replay --queue orders --all      put them back (progress bar)
//	queen-node ctl cluster                              nodes, roles, leader, term, applied, lag
//
// and queue, depth, group, group seek, group delete, dlq purge, messages,
// message, kv get, kv list, maintenance, drain and health
// (`queen-node ctl -h`).
//
// Flags: --url (QUEEN_URL, default http://127.0.0.1:6632), --token
// (QUEEN_TOKEN), the TLS options of the Go client's http.Client (--ca,
// --insecure-skip-verify, --cert/--key), -o table|json and --timeout (each
// request). Global flags go before or after the command; a command's own
// flags go anywhere among its arguments.
//
// Output: a table (aligned columns, counts above 10,000 as 12.3k, times as
// "3m ago") or -o json: the API's answer as it came, indented. Three
// commands compose answers and say so: queues adds "deadLetter" to each
// row of the list (from the queue's detail), cluster adds "health" (the
// node's /health) to each node of the cluster view, and the writes that
// run many requests (dlq replay, drain) print a summary object. Progress,
// prompts and notes go to stderr, so stdout stays the answer.
//
// Exit status: 0 done; 1 the API refused (its {"error"} text and the HTTP
// status on stderr), the node could not be reached, or the operator did
// not confirm; 2 a usage error, after a short help.
//
// Long operations (replaying or purging many dead letters, a drain) show a
// progress bar (github.com/schollz/progressbar) when stderr is a terminal,
// and plain lines every --progress-interval otherwise. Destructive ones
// (dlq purge, drain, group delete) ask on stderr and read the answer from
// stdin unless --yes.
//
// Why a thin HTTP layer and not the Go client: -o json must print the
// API's own JSON, which a typed client would have to re-encode, and the
// admin views (queues, groups, the cluster, maintenance) exist on the
// HTTP API only, where the client's promise is that both of its
// transports offer the same calls. The layer (api.go) shares one
// *http.Client (the TLS options) and the token with a queen.Client, which
// drain pops and acks with; it resends only answers that say nothing was
// done (503 no_leader or retry, 429 overloaded) and reads.
package ctl
