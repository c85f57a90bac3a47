package fsm

import (
	"github.com/queen-node/queen-node/audit"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/producers"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/streams"
	"github.com/queen-node/queen-node/timers"
	"github.com/queen-node/queen-node/traces"
)

// bMeta holds the FSM's own record: the applied index and the operator
// switches, written in the same commit as the entries they describe.
var bMeta = store.Bucket("meta") // "meta" → MetaRecord

var metaKey = []byte("meta")

// Buckets lists every bucket of the state file, for store.Open: the FSM's
// own and each domain's.
var Buckets = func() []store.Bucket {
	bs := []store.Bucket{bMeta, bPlacements}
	for _, domain := range [][]store.Bucket{queue.Buckets, leases.Buckets, timers.Buckets, idempotency.Buckets,
		{kvstore.BucketEntries, kvstore.BucketExpiry}, {audit.Bucket}, traces.Buckets, streams.Buckets, producers.Buckets} {
		bs = append(bs, domain...)
	}
	return bs
}()
