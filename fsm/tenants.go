package fsm

import (
	"errors"
	"slices"
	"sync"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/tenant"
)

// Tenants. A command names its tenant (Command.tenant, a tenant.Key); its
// handler reads and writes that tenant's buckets only, through the
// tenant's store.Scope, so the domain packages name their buckets as they
// always did and never see another tenant's records. The default tenant
// ("") has no scope: its records keep today's keys. Every bucket but the
// meta record is a tenant's; the meta record (applied index, switches,
// sealing keys) is the log's. The meta record lists the other tenants
// that wrote (so the leader's loops, the state hash and the message files'
// housekeeping walk them all).

// tenantBuckets are the buckets each tenant has its own of.
var tenantBuckets = Buckets[2:] // all but the meta record and the placement table

var scopes sync.Map // tenant key → *store.Scope

// ScopeOf is the scope of the tenant named by key ("" = the default
// tenant: nil, today's buckets).
func ScopeOf(key string) *store.Scope {
	if key == "" {
		return nil
	}
	if s, ok := scopes.Load(key); ok {
		return s.(*store.Scope)
	}
	s, _ := scopes.LoadOrStore(key, store.NewScope("tenant/"+key+"/", tenantBuckets))
	return s.(*store.Scope)
}

// QueueKey names a queue of a tenant (its tenant.Key) the way Changes
// does: by its name in the default tenant, prefixed by the tenant's key in
// another ('\x00' is in no name), so a change wakes the watchers of its
// own tenant's queue only.
func QueueKey(tenantKey, queue string) string {
	if tenantKey == "" {
		return queue
	}
	return tenantKey + "\x00" + queue
}

// validTenant checks a command's tenant key: "" or a valid name other
// than the default's (whose key is "").
func validTenant(key string) error {
	if key == "" {
		return nil
	}
	if key == tenant.Default {
		return errors.New("fsm: the default tenant's key is \"\"")
	}
	return tenant.Valid(key)
}

// tenantKeys are the tenants a state holds: the default first, then the
// others in order.
func tenantKeys(meta *command.MetaRecord) []string {
	return append([]string{""}, meta.Tenants...)
}

// noteTenant adds key to meta's tenants the first time one of its
// commands is applied (every replica at the same entry).
func noteTenant(meta *command.MetaRecord, key string) {
	if key == "" {
		return
	}
	if i, found := slices.BinarySearch(meta.Tenants, key); !found {
		meta.Tenants = slices.Insert(meta.Tenants, i, key)
	}
}

// committedAll is every tenant's partitions as the message files should
// hold them.
func (f *FSM) committedAll(r store.Reader, meta *command.MetaRecord) []msgstore.PartitionState {
	var out []msgstore.PartitionState
	for _, key := range tenantKeys(meta) {
		out = append(out, f.queue.Reader(ScopeOf(key).Reader(r)).Committed()...)
	}
	return out
}

// liveAnywhere reports whether some tenant's state holds partition pid.
func (f *FSM) liveAnywhere(r store.Reader, meta *command.MetaRecord, pid []byte) bool {
	for _, key := range tenantKeys(meta) {
		if f.queue.Reader(ScopeOf(key).Reader(r)).Live(pid) {
			return true
		}
	}
	return false
}

// stateBuckets are every bucket a state's digest covers: the log's and
// each tenant's.
func stateBuckets(meta *command.MetaRecord) []store.Bucket {
	out := append([]store.Bucket(nil), Buckets...)
	for _, key := range meta.Tenants {
		out = append(out, ScopeOf(key).Buckets()...)
	}
	return out
}

// Tenants names the tenants this state holds (tenant names, the default
// first), as of the last applied batch.
func (f *FSM) Tenants() []string {
	keys := f.tenants.Load()
	if keys == nil {
		return []string{tenant.Default}
	}
	out := make([]string, 0, len(*keys)+1)
	out = append(out, tenant.Default)
	for _, k := range *keys {
		out = append(out, tenant.Name(k))
	}
	return out
}

// TenantKeys are Tenants as keys ("" for the default).
func (f *FSM) TenantKeys() []string {
	if keys := f.tenants.Load(); keys != nil {
		return append([]string{""}, *keys...)
	}
	return []string{""}
}

func (f *FSM) publishTenants(meta *command.MetaRecord) {
	if cur := f.tenants.Load(); cur != nil && slices.Equal(*cur, meta.Tenants) {
		return
	}
	keys := slices.Clone(meta.Tenants)
	f.tenants.Store(&keys)
}
