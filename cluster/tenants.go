package cluster

import (
	"context"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/tenant"
)

// Tenants: a front end carries the request's tenant in its context
// (tenant.With); the node stamps it on the command it proposes and reads
// that tenant's state for the request's reads, pops and queries. A node's
// own loops carry none and name the tenant on each command they propose
// (leader.go walks every tenant). A forwarded call carries it across
// (grpcapi's forwarding service puts it in the call's metadata).

// tenantKey is the tenant.Key of the tenant ctx carries.
func tenantKey(ctx context.Context) string { return tenant.Key(tenant.From(ctx)) }

// stampTenant makes cmd a command of the tenant ctx carries, when it
// carries one (a command of a node's own loop keeps the tenant it names).
func stampTenant(ctx context.Context, cmd *command.Command) {
	if tenant.Carried(ctx) {
		cmd.Tenant = tenantKey(ctx)
	}
}

// Tenants names the tenants this node's state holds, the default first.
func (n *Node) Tenants() []string { return n.fsm.Tenants() }
