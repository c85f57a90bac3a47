// Package dashboard serves the operator's dashboard at /dashboard: a page
// of plain HTML, CSS and JavaScript embedded in the binary (assets/), with
// no build step and nothing fetched from elsewhere. The page itself is
// static and public; everything it shows it reads from the node's own API
// (spec §4.8–§4.15, the status and analytics routes of §4.12), sending
// the bearer token the operator pasted into it, so JWT decides what each
// operator may see and do exactly as for any other client.
//
// Any node serves it. Its API calls go to the node that served it, which
// reads linearizably (or forwards to the leader) like any other read, so
// the state it shows is the same whichever node serves it; the per-node
// figures of the cluster view are each node's own, asked by the serving
// node (httpapi/peers.go), and the rates are the serving node's flow
// counts (fsm.Flows), which the page says.
//
// The page shows one tenant at a time: the one its token's claim names,
// or, where the node reads x-queen-tenant for the token (a "*" claim, or
// --trust-tenant-header, which the public /health's tenant.headerTrusted
// says), the one the operator picked from
// GET /api/v1/system/tenants, sent as that header by the page's one fetch
// wrapper (app.js api()). The landing page has a row per Raft group from
// /health's groups and the placement table from its placements.
//
// Wrap mounts it in front of the API handler:
//
//	handler = dashboard.Wrap(handler)
package dashboard
