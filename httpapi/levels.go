package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/auth"
)

// The access level of every route with JWT on (spec §3, addendum §4.11): a
// route not listed needs read-write. producer marks what a write-only
// token may call: push, and timer schedules.
type routeAccess struct {
	level    auth.Level
	producer bool
}

var routeLevels = map[string]routeAccess{
	"GET /health":                                {level: auth.Public},
	"GET /metrics":                               {level: auth.Public},
	"GET /metrics/prometheus":                    {level: auth.Public},
	"POST /api/v1/push":                          {level: auth.ReadWrite, producer: true},
	"POST /api/v1/timers":                        {level: auth.ReadWrite, producer: true},
	"GET /api/v1/resources/queues":               {level: auth.ReadOnly},
	"GET /api/v1/resources/queues/{queue}":       {level: auth.ReadOnly},
	"GET /api/v1/resources/queues/{queue}/depth": {level: auth.ReadOnly},
	"DELETE /api/v1/resources/queues/{queue}":    {level: auth.Admin},
	"GET /api/v1/dlq":                            {level: auth.ReadOnly},
	"GET /api/v1/kv/{ns}/{key...}":               {level: auth.ReadOnly},
	// A KV call of reads only is read-only (spec §3: "reads: read-only");
	// one with a write needs read-write, which auth.MayRun asks of its
	// command.
	"POST /api/v1/kv":                                       {level: auth.ReadOnly},
	"GET /api/v1/timers/{queue}":                            {level: auth.ReadOnly},
	"GET /api/v1/timers/{queue}/{timerKey...}":              {level: auth.ReadOnly},
	"GET /api/v1/consumer-groups":                           {level: auth.ReadOnly},
	"GET /api/v1/consumer-groups/lagging":                   {level: auth.ReadOnly},
	"GET /api/v1/consumer-groups/{group}":                   {level: auth.ReadOnly},
	"DELETE /api/v1/consumer-groups/{group}":                {level: auth.Admin},
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}": {level: auth.Admin},
	"POST /api/v1/stats/refresh":                            {level: auth.Admin},
	"GET /api/v1/system/cluster":                            {level: auth.ReadOnly},
	"DELETE /api/v1/system/cluster/nodes/{id}":              {level: auth.Admin},
	"GET /api/v1/system/kv-timers":                          {level: auth.Admin},
	"POST /api/v1/system/kv-timers":                         {level: auth.Admin},
	"GET /api/v1/system/maintenance":                        {level: auth.Admin},
	"POST /api/v1/system/maintenance":                       {level: auth.Admin},
	"GET /api/v1/system/maintenance/pop":                    {level: auth.Admin},
	"POST /api/v1/system/maintenance/pop":                   {level: auth.Admin},
	"GET /api/v1/system/state-hash":                         {level: auth.Admin},
	"GET /api/v1/system/audit":                              {level: auth.Admin},
	"GET /api/v1/system/backup":                             {level: auth.Admin},
	"POST /api/v1/system/restore":                           {level: auth.Admin},
	// Messages, dead letters and traces (spec §3, §4.9, §4.15). A replay
	// (by id or the retry route) is read-write: it appends a stored message
	// again, as a push or a backward seek does, and the audit trail records
	// it. A purge destroys a queue's dead letters for good: admin, like
	// deleting a queue or a group.
	"GET /api/v1/messages":                                      {level: auth.ReadOnly},
	"GET /api/v1/messages/{partitionId}/{transactionId}":        {level: auth.ReadOnly},
	"DELETE /api/v1/messages/{partitionId}/{transactionId}":     {level: auth.ReadWrite},
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": {level: auth.ReadWrite},
	"POST /api/v1/dlq/{id}/replay":                              {level: auth.ReadWrite},
	"DELETE /api/v1/dlq":                                        {level: auth.Admin},
	"POST /api/v1/traces":                                       {level: auth.ReadWrite},
	"GET /api/v1/traces/names":                                  {level: auth.ReadOnly},
	"GET /api/v1/traces/by-name/{name}":                         {level: auth.ReadOnly},
	"GET /api/v1/traces/{partitionId}/{transactionId}":          {level: auth.ReadOnly},
	// Status and analytics (spec §3, §4.12): read-only views.
	"GET /api/v1/status":                          {level: auth.ReadOnly},
	"GET /api/v1/status/queues":                   {level: auth.ReadOnly},
	"GET /api/v1/status/queues/{queue}":           {level: auth.ReadOnly},
	"GET /api/v1/status/queues/{queue}/messages":  {level: auth.ReadOnly},
	"GET /api/v1/status/analytics":                {level: auth.ReadOnly},
	"GET /api/v1/status/buffers":                  {level: auth.ReadOnly},
	"GET /api/v1/analytics/queue-lag":             {level: auth.ReadOnly},
	"GET /api/v1/analytics/queue-ops":             {level: auth.ReadOnly},
	"GET /api/v1/analytics/retention":             {level: auth.ReadOnly},
	"GET /api/v1/analytics/system-metrics":        {level: auth.ReadOnly},
	"GET /api/v1/analytics/worker-metrics":        {level: auth.ReadOnly},
	"GET /api/v1/analytics/queue-parked-replicas": {level: auth.ReadOnly},
	"GET /api/v1/analytics/postgres-stats":        {level: auth.ReadOnly},
}

// accessOf is the access a route pattern needs.
func accessOf(pattern string) routeAccess {
	if a, ok := routeLevels[pattern]; ok {
		return a
	}
	return routeAccess{level: auth.ReadWrite}
}

// identityOf is the caller a request's token named; nil with JWT off (or
// on a public route).
func identityOf(r *http.Request) *auth.Identity { return auth.IdentityFrom(r.Context()) }

// authorize checks the request's token against its route; false means it
// answered the refusal.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, pattern string) (*http.Request, bool) {
	v := a.cfg.Auth
	acc := accessOf(pattern)
	if v == nil || acc.level == auth.Public || v.Skip(r.URL.Path) {
		return r, true
	}
	id, aerr := v.Authenticate(r.Header.Get("Authorization"))
	if aerr == nil && !id.Allows(acc.level, acc.producer) {
		aerr = auth.ErrInsufficient
	}
	if aerr != nil {
		writeJSON(w, aerr.Status, errorBody{Error: aerr.Msg})
		return r, false
	}
	return r.WithContext(auth.WithIdentity(r.Context(), id)), true
}

// RouteAccess is the level a route pattern needs and whether a write-only
// token may call it (for the auth matrix and the documentation).
func RouteAccess(pattern string) (auth.Level, bool) {
	a := accessOf(pattern)
	return a.level, a.producer
}
