// Package tenant names the isolated sets of queues, KV namespaces, timers,
// locks, streams and audit records a cluster holds. A request's tenant
// comes from its connection (a token's claim, or a header a trusted proxy
// sets), never from its body; this package carries it in a context and
// holds the one rule for a valid name. The default tenant is stored under
// today's keys (its key is ""), so a data dir written before tenants is the
// default tenant unchanged.
package tenant
