package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/kafka"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/tenant"
)

// The Kafka listener serves every tenant: a token's tenant claim names the
// connection's tenant. Two tenants (acme, globex) use the same topic name,
// the same consumer group name and the same transactional.id at once: each
// reads only its own records, commits only its own offsets, lists only its
// own groups, and its transactional producer does not fence the other's.
// With --raft-groups 2 acme lives in group 1 and globex in group 0 (with
// the default tenant): a Kafka call goes to its tenant's group, where the
// HTTP API of that tenant finds the records.
func TestKafkaTenantsAreIsolated(t *testing.T) {
	for _, groups := range []int{1, 2} {
		t.Run("raft-groups="+strconv.Itoa(groups), func(t *testing.T) {
			n, addr := startJWTKafkaNode(t, "--raft-groups", strconv.Itoa(groups))
			kafkaTenantIsolation(t, n, addr)
		})
	}
}

// kafkaTenant is one tenant of the isolation test.
type kafkaTenant struct {
	name    string
	token   string
	opt     kgo.Opt // its SASL
	records int     // how many it produces to "orders"
}

func (k *kafkaTenant) value(i int) string { return fmt.Sprintf(`{"tenant":%q,"i":%d}`, k.name, i) }

// ownRecord reports whether a record's value names tenant k.
func (k *kafkaTenant) ownRecord(v []byte) bool {
	var r struct{ Tenant string }
	return json.Unmarshal(v, &r) == nil && r.Tenant == k.name
}

func kafkaTenantIsolation(t *testing.T, n *node, addr string) {
	seeds := []string{addr}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	tok := func(claims map[string]any) string { return kafkaToken(t, ctlJWTSecret, claims) }
	acme := &kafkaTenant{name: "acme", records: 5}
	globex := &kafkaTenant{name: "globex", records: 3}
	acme.token = tok(map[string]any{"sub": "acme-app", "role": "read-write", "tenant": "acme"})
	globex.token = tok(map[string]any{"sub": "globex-app", "role": "read-write", "tenant": "globex"})
	acme.opt, globex.opt = plainSASL(acme.token), oauthSASL(globex.token)
	tenants := []*kafkaTenant{acme, globex}

	// One topic name, two topics: each tenant creates "orders" (the second
	// create would be TOPIC_ALREADY_EXISTS if they were one) and produces.
	admins := map[string]*kgo.Client{}
	for _, k := range tenants {
		cl := kafkaClient(t, seeds, k.opt)
		admins[k.name] = cl
		createTopic(t, cl, "orders", 2)
		createTopic(t, cl, "out", 1)
		var rs []*kgo.Record
		for i := range k.records {
			rs = append(rs, &kgo.Record{Topic: "orders", Key: []byte(k.name + "-" + strconv.Itoa(i)), Value: []byte(k.value(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s produce: %v", k.name, err)
		}
	}
	// The default tenant (a token without a tenant claim) sees neither.
	def := kadm.NewClient(kafkaClient(t, seeds, plainSASL(tok(map[string]any{"sub": "d", "role": "read-write"}))))
	if tops, err := def.ListTopics(ctx); err != nil || tops.Has("orders") {
		t.Fatalf("the default tenant lists %v (%v), want no orders", tops.Names(), err)
	}

	// Consumers, all at once: in each tenant the group "billing" (the same
	// name in both) and a group of the tenant's own name. Each reads its
	// tenant's records, all of them, and commits them.
	type consumer struct {
		k       *kafkaTenant
		group   string
		cl      *kgo.Client
		mu      sync.Mutex
		seen    map[string]bool
		foreign []string
		done    chan struct{}
	}
	var consumers []*consumer
	for _, k := range tenants {
		for _, group := range []string{"billing", k.name + "-audit"} {
			c := &consumer{k: k, group: group, seen: map[string]bool{}, done: make(chan struct{})}
			c.cl = kafkaClient(t, seeds, k.opt, kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
				kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
			consumers = append(consumers, c)
		}
	}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := c.cl.PollFetches(pollCtx)
				c.mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					if !c.k.ownRecord(r.Value) {
						c.foreign = append(c.foreign, string(r.Value))
					}
					c.seen[string(r.Key)] = true
				})
				full := len(c.seen) >= c.k.records
				c.mu.Unlock()
				if len(fs.Records()) > 0 {
					_ = c.cl.CommitRecords(pollCtx, fs.Records()...)
				}
				if full {
					select {
					case <-c.done:
					default:
						close(c.done)
					}
				}
			}
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopPolling()
			wg.Wait()
		}
	}
	defer stop()
	for _, c := range consumers {
		select {
		case <-c.done:
		case <-time.After(40 * time.Second):
			c.mu.Lock()
			seen := len(c.seen)
			c.mu.Unlock()
			t.Fatalf("%s's group %s consumed %d of its %d records", c.k.name, c.group, seen, c.k.records)
		}
	}

	// While every group has its member: each tenant's ListGroups names its
	// own two groups only, and its "billing" has one member, its own.
	wantGroups := func(k *kafkaTenant) []string {
		return slices.Sorted(slices.Values([]string{"billing", k.name + "-audit"}))
	}
	listed := func(k *kafkaTenant) []string {
		t.Helper()
		ls, err := kadm.NewClient(admins[k.name]).ListGroups(ctx)
		if err != nil {
			t.Fatalf("%s ListGroups: %v", k.name, err)
		}
		names := ls.Groups()
		sort.Strings(names)
		return names
	}
	for _, k := range tenants {
		if got := listed(k); !slices.Equal(got, wantGroups(k)) {
			t.Errorf("%s lists the groups %v, want %v", k.name, got, wantGroups(k))
		}
		ds, err := kadm.NewClient(admins[k.name]).DescribeGroups(ctx, "billing")
		if err != nil {
			t.Fatalf("%s DescribeGroups: %v", k.name, err)
		}
		if d := ds["billing"]; d.Err != nil || len(d.Members) != 1 {
			t.Errorf("%s's group billing: %d members (%v), want its one", k.name, len(d.Members), d.Err)
		}
	}
	stop()
	for _, c := range consumers {
		if len(c.foreign) > 0 || len(c.seen) != c.k.records {
			t.Errorf("%s's group %s read %d records, of them another tenant's: %v", c.k.name, c.group, len(c.seen), c.foreign)
		}
		c.cl.Close() // leaves the group
	}

	// Committed offsets: each tenant's "billing" is at its own records' end.
	for _, k := range tenants {
		offs, err := kadm.NewClient(admins[k.name]).FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatalf("%s FetchOffsets: %v", k.name, err)
		}
		total := int64(0)
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Errorf("%s billing %s/%d: %v", k.name, o.Topic, o.Partition, o.Err)
			}
			total += o.At - 1 // the first offset is 1
		})
		if total != int64(k.records) {
			t.Errorf("%s's billing committed past %d records, want its %d", k.name, total, k.records)
		}
		// and once the members left, the groups are still the tenant's own
		if got := listed(k); !slices.Equal(got, wantGroups(k)) {
			t.Errorf("after the members left %s lists %v, want %v", k.name, got, wantGroups(k))
		}
	}

	// One transactional.id in both tenants: acme begins and stages, globex
	// (InitProducerId of the same id) commits, acme goes on and commits:
	// never fenced, and each tenant's "out" holds its own records only.
	txn := func(k *kafkaTenant) *kgo.Client {
		return kafkaClient(t, seeds, k.opt, kgo.TransactionalID("tx-1"), kgo.TransactionTimeout(30*time.Second))
	}
	ta, tg := txn(acme), txn(globex)
	produceIn := func(cl *kgo.Client, k *kafkaTenant, i int) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte(k.value(i))}).FirstErr(); err != nil {
			t.Fatalf("%s transactional produce %d: %v", k.name, i, err)
		}
	}
	must(t, ta.BeginTransaction())
	produceIn(ta, acme, 0)
	must(t, tg.BeginTransaction())
	produceIn(tg, globex, 0)
	if err := tg.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("globex's commit: %v", err)
	}
	produceIn(ta, acme, 1)
	if err := ta.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("acme's commit after globex's InitProducerId of the same transactional.id: %v", err)
	}
	for _, c := range []struct {
		k    *kafkaTenant
		want int
	}{{acme, 2}, {globex, 1}} {
		var got []string
		readAll(t, seeds, "out", func(r *kgo.Record) { got = append(got, string(r.Value)) }, c.k.opt)
		ok := len(got) == c.want
		for _, v := range got {
			ok = ok && c.k.ownRecord([]byte(v))
		}
		if !ok {
			t.Errorf("%s's out holds %v, want its own %d", c.k.name, got, c.want)
		}
	}

	// The HTTP API of a tenant sees what it produced over Kafka (with two
	// Raft groups: Kafka wrote in the tenant's group).
	for _, k := range tenants {
		hdr := map[string]string{"Authorization": "Bearer " + k.token}
		got := 0
		for p := range 2 {
			r, err := n.send(10*time.Second, http.MethodGet,
				fmt.Sprintf("/api/v1/pop/queue/orders/partition/%d?batch=10&consumerGroup=http-view&subscriptionMode=all", p), nil, hdr)
			must(t, err)
			if r.Status == http.StatusNoContent {
				continue
			}
			var popped struct {
				Messages []struct {
					Data json.RawMessage `json:"data"`
				} `json:"messages"`
			}
			r.decode(t, &popped)
			for _, m := range popped.Messages {
				if !k.ownRecord(m.Data) {
					t.Errorf("%s pops over HTTP %s", k.name, m.Data)
				}
				got++
			}
		}
		if got != k.records {
			t.Errorf("%s pops %d of its %d Kafka records over HTTP", k.name, got, k.records)
		}
	}
}

// A token whose tenant claim is not a tenant name is refused at SASL with
// the rule, and the connection closed; "*" (an admin's, every tenant) is
// served as the default tenant, as over HTTP without a header.
func TestKafkaTenantClaimAtSASL(t *testing.T) {
	_, addr := startJWTKafkaNode(t)
	seeds := []string{addr}
	bad := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "x", "role": "read-write", "tenant": "Not A Tenant"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, mech := range []string{"PLAIN", "OAUTHBEARER"} {
		t.Run(mech, func(t *testing.T) {
			opt, authBytes := plainSASL(bad), plainBytes(bad)
			if mech == "OAUTHBEARER" {
				opt, authBytes = oauthSASL(bad), []byte("n,,\x01auth=Bearer "+bad+"\x01\x01")
			}
			pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
			defer pcancel()
			err := kafkaClient(t, seeds, opt, kgo.RetryTimeout(2*time.Second)).Ping(pctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping with an invalid tenant claim: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			rc := dialRaw(t, addr)
			ar := rc.saslAuth(mech, authBytes)
			msg := ""
			if ar.ErrorMessage != nil {
				msg = *ar.ErrorMessage
			}
			if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(msg, "tenant claim") || !strings.Contains(msg, tenant.Rule) {
				t.Fatalf("SaslAuthenticate with an invalid tenant claim: code %d, message %q; want the claim and the rule named", ar.ErrorCode, msg)
			}
			md := kmsg.NewPtrMetadataRequest()
			rc.send(md, 1)
			rc.closed("metadata after a refused tenant claim", md)
		})
	}

	// "*" is the default tenant's: what it makes, a token without a claim sees.
	every := plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin", "tenant": "*"}))
	createTopic(t, kafkaClient(t, seeds, every), "made-by-every", 1)
	plain := kadm.NewClient(kafkaClient(t, seeds, plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "d", "role": "read-write"}))))
	acme := kadm.NewClient(kafkaClient(t, seeds, plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "a", "role": "read-write", "tenant": "acme"}))))
	if tops, err := plain.ListTopics(ctx); err != nil || !tops.Has("made-by-every") {
		t.Fatalf("the default tenant lists %v (%v), want made-by-every", tops.Names(), err)
	}
	if tops, err := acme.ListTopics(ctx); err != nil || tops.Has("made-by-every") {
		t.Fatalf("acme lists %v (%v), want no made-by-every", tops.Names(), err)
	}
}

// With --raft-groups 3 on three nodes each group has its own leader, and a
// tenant's Kafka calls are its group's: every node names the leader of the
// tenant's group as the leader of its partitions and as its group
// coordinator (the default tenant's is group 0's leader, another node), a
// node that does not lead the tenant's group answers its JoinGroup
// NOT_COORDINATOR, and a franz-go consumer group and a transaction of the
// tenant, seeded with every node, work.
func TestKafkaTenantCoordinatorIsItsGroupLeader(t *testing.T) {
	const groups = 3
	admin := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"})
	c := startCluster(t, nodeOpts{DefaultSubscriptionMode: "all",
		Extra: []string{"--raft-groups", strconv.Itoa(groups), "--jwt-enabled", "--jwt-secret", ctlJWTSecret},
		Node:  func(_ int, s *nodeproc.Spec) error { s.Kafka = true; s.Token = admin; return nil }})
	awaitSpread(t, c, groups)
	leaders := groupLeaders(t, c.nodes[0])
	const g = 1
	name := tenantsInGroups(groups)[g]
	if leaders[g] == leaders[0] {
		t.Fatalf("group %d and group 0 have one leader: %v", g, leaders)
	}
	tok := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "app", "role": "read-write", "tenant": name})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	seeds := c.kafkaSeeds()
	cl := kafkaClient(t, seeds, plainSASL(tok))
	createTopic(t, cl, "orders", 2)

	// By hand, on every node.
	leaderOf := func(group int) int32 { return kafka.BrokerID(leaders[group]) }
	for _, n := range c.nodes {
		for _, as := range []struct {
			who   string
			token string
			group int
		}{{name, tok, g}, {"the default tenant", admin, 0}} {
			rc := dialRaw(t, n.Addrs().Kafka)
			if ar := rc.saslAuth("PLAIN", plainBytes(as.token)); ar.ErrorCode != 0 {
				t.Fatalf("SASL as %s on %s: %v", as.who, n.ID(), kerr.ErrorForCode(ar.ErrorCode))
			}
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey = "billing"
			rc.send(fc, 1)
			resp, err := rc.recv(fc)
			must(t, err)
			if f := resp.(*kmsg.FindCoordinatorResponse); f.ErrorCode != 0 || f.NodeID != leaderOf(as.group) {
				t.Errorf("%s asks %s for its coordinator: broker %d (%v), want group %d's leader %s (%d)",
					as.who, n.ID(), f.NodeID, kerr.ErrorForCode(f.ErrorCode), as.group, leaders[as.group], leaderOf(as.group))
			}
			if as.group != g {
				continue
			}
			var m *kmsg.MetadataResponse
			for try := 0; ; try++ { // a follower may not have applied the topic yet
				md := kmsg.NewPtrMetadataRequest()
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("orders")
				md.Topics = append(md.Topics, mt)
				rc.send(md, 1)
				resp, err = rc.recv(md)
				must(t, err)
				m = resp.(*kmsg.MetadataResponse)
				if len(m.Topics) == 1 && len(m.Topics[0].Partitions) == 2 {
					break
				}
				if try == 50 {
					t.Fatalf("%s's metadata of orders on %s: %+v", name, n.ID(), m.Topics)
				}
				time.Sleep(100 * time.Millisecond)
			}
			for _, p := range m.Topics[0].Partitions {
				if p.Leader != leaderOf(g) {
					t.Errorf("%s's orders/%d on %s: leader %d, want group %d's leader %s (%d)", name, p.Partition, n.ID(), p.Leader, g, leaders[g], leaderOf(g))
				}
			}
			jg := kmsg.NewPtrJoinGroupRequest()
			jg.Group, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis, jg.ProtocolType = "by-hand", 10000, 10000, "consumer"
			jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
			rc.send(jg, 5)
			resp, err = rc.recv(jg)
			must(t, err)
			want := kerr.NotCoordinator.Code
			if n.ID() == leaders[g] {
				want = kerr.MemberIDRequired.Code // KIP-394: the coordinator's first answer
			}
			if code := resp.(*kmsg.JoinGroupResponse).ErrorCode; code != want {
				t.Errorf("%s's JoinGroup on %s (group %d's leader is %s): %v, want %v", name, n.ID(), g, leaders[g],
					kerr.ErrorForCode(code), kerr.ErrorForCode(want))
			}
		}
	}

	// franz-go, seeded with every node: produce, a consumer group, a
	// transaction.
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "orders", Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons := kafkaClient(t, seeds, plainSASL(tok), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 10 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += len(fs.Records())
		if err := cons.CommitRecords(ctx, fs.Records()...); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "billing")
	must(t, err)
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At - 1 })
	if got != 10 || total != 10 {
		t.Fatalf("the group consumed %d and committed past %d records, want 10", got, total)
	}
	tx := kafkaClient(t, seeds, plainSASL(tok), kgo.TransactionalID("tx-1"), kgo.TransactionTimeout(30*time.Second))
	must(t, tx.BeginTransaction())
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(`{"in":"a transaction"}`)}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if ends := endOffsets(t, ctx, cl, "orders"); ends[0]+ends[1] != 2+11 { // each partition's next offset; the first is 1
		t.Fatalf("orders ends at %v, want 11 records", ends)
	}
}
