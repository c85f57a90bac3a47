package kafka

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/tenant"
)

// Transactions: the coordinator of a tenant's transactions is the leader
// of the tenant's Raft group. A transactional id is a tenant's: the
// coordinator keys its state by (tenant, transactional id), so the same
// id in two tenants is two producers that never fence each other (their
// producer ids and epochs are each tenant's state in the log too).
// A transactional producer's records and its TxnOffsetCommit offsets are
// staged here, in memory, and EndTxn(commit) writes them as ONE
// Transaction entry (pushes + positions, guarded by the producer's epoch):
// the outputs appear and the input offsets move together, or neither.
// Abort, a fenced epoch, a timeout and a failover before the commit entry
// write nothing: nothing staged was ever in the log.
//
// A coordinator knows a transaction whole only if it saw it begin (after
// InitProducerId or the previous EndTxn, in its current term). One it
// meets halfway — it became leader while the producer was staging on the
// old one — is doomed: its commit is answered TRANSACTION_ABORTABLE, never
// success, and its abort starts the producer clean. A commit that may have
// landed (its entry's outcome unknown, or an EndTxn that may retry one the
// old coordinator appended) is answered PRODUCER_FENCED: any answer the
// client recovers from makes it rewind to offsets it last saw committed
// and replay (kafka/DESIGN.md, Transactions).

type txnPartition struct {
	topic     string
	partition int32
}

// txnKey names a transactional producer: its tenant and its id.
type txnKey struct{ tenant, id string }

type txnState struct {
	tenant   string
	id       string
	producer int64
	epoch    int16
	timeout  time.Duration
	term     uint64 // the coordinator's term when it saw the transaction begin
	doomed   string // why the commit must fail ("" = the coordinator holds all of it)
	begun    time.Time
	open     bool // something was added since the last EndTxn
	// stagedHere: a call of this transaction other than EndTxn reached
	// this coordinator, so its EndTxn was not sent to an earlier one
	stagedHere bool
	pushes     []*command.TxnOp
	seen       map[txnPartition]map[int32]bool // base sequences staged (a retried produce)
	offsets    map[string]map[txnPartition]*command.PositionOp
	// committing: the offsets of a commit entry in flight (still pending
	// for RequireStable until its write returns)
	committing map[string]map[txnPartition]*command.PositionOp
	groups     map[string]bool
	records    int
	bytes      int
}

type txnCoordinator struct {
	s      *Server
	mu     sync.Mutex
	txns   map[txnKey]*txnState
	staged int // bytes staged by every open transaction
}

func newTxnCoordinator(s *Server) *txnCoordinator {
	return &txnCoordinator{s: s, txns: map[txnKey]*txnState{}}
}

// run dooms transactions open past their timeout and forgets a tenant's
// when this node stops leading the tenant's Raft group (asked with a ctx
// of that tenant).
func (t *txnCoordinator) run(done <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		leads := map[string]bool{}
		for key := range t.txns {
			if _, asked := leads[key.tenant]; !asked {
				leads[key.tenant] = t.s.leads(tenantCtx(key.tenant))
			}
		}
		for key, st := range t.txns {
			switch {
			case !leads[key.tenant]:
				t.drop(st)
				delete(t.txns, key)
			case st.open && st.doomed == "" && time.Since(st.begun) > st.timeout:
				t.s.log.Warn("kafka: a transaction ran past its timeout: aborted", "tenant", key.tenant, "transactional_id", key.id, "timeout", st.timeout)
				st.doomed = "the transaction ran past its timeout (" + st.timeout.String() + ")"
				t.release(st)
			}
		}
		t.report()
		t.mu.Unlock()
	}
}

func (t *txnCoordinator) report() {
	t.s.cfg.Metrics.openTxns.Set(float64(len(t.txns)))
	t.s.cfg.Metrics.staged.Set(float64(t.staged))
}

// release forgets what st staged (it keeps st itself).
func (t *txnCoordinator) release(st *txnState) {
	t.staged -= st.bytes
	st.pushes, st.offsets, st.seen, st.groups = nil, nil, nil, nil
	st.records, st.bytes = 0, 0
}

func (t *txnCoordinator) drop(st *txnState) { t.release(st) }

// state finds the transaction a call names (a transactional id of the
// tenant ctx carries), checking its producer id and epoch; one this
// coordinator did not see begin is made, doomed. code is the Kafka error
// when the call may not go on. The term is the tenant's Raft group's.
func (t *txnCoordinator) state(ctx context.Context, id string, producer int64, epoch int16) (*txnState, int16) {
	raft := t.s.node.StatusOf(ctx)
	if raft.Role != "leader" {
		return nil, kerr.NotCoordinator.Code
	}
	key := txnKey{tenant.From(ctx), id}
	st := t.txns[key]
	if st != nil && st.term != raft.Term {
		t.drop(st)
		st = nil
	}
	if st == nil {
		st = &txnState{tenant: key.tenant, id: id, producer: producer, epoch: epoch, term: raft.Term, timeout: time.Minute,
			doomed: "this node became the transaction coordinator while the transaction was open"}
		t.txns[key] = st
	}
	switch {
	case producer != st.producer:
		return nil, kerr.InvalidProducerIDMapping.Code
	case epoch < st.epoch:
		return nil, kerr.ProducerFenced.Code
	case epoch > st.epoch:
		// a newer epoch than this coordinator handed out: InitProducerId
		// ran on another leader; the log's epoch decides at commit
		st.epoch, st.doomed = epoch, "this node did not see the transaction begin"
	}
	if !st.open {
		st.open, st.begun = true, time.Now()
	}
	return st, 0
}

func (t *txnCoordinator) initProducerID(ctx context.Context, r *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	in := &command.KafkaInitProducer{MaxProducers: uint32(t.s.cfg.Limits.MaxProducers), IdleUs: t.s.cfg.Limits.ProducerIdle.Microseconds()}
	if r.TransactionalID != nil {
		timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
		switch {
		case *r.TransactionalID == "":
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		case !t.s.leads(ctx):
			resp.ErrorCode = kerr.NotCoordinator.Code
			return resp
		case timeout <= 0 || timeout > t.s.cfg.Limits.TxnMaxTimeout:
			resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
			return resp
		}
		in.TransactionalId, in.TxnTimeoutMs = *r.TransactionalID, r.TransactionTimeoutMillis
	}
	res, _, err := t.s.pipe.Write(ctx, callOf(ctx), &command.Command{Body: &command.Command_KafkaInitProducer{KafkaInitProducer: in}})
	out, ok := res.(*command.KafkaInitProducerResult)
	if err != nil || !ok {
		forbidden := kerr.TransactionalIDAuthorizationFailed.Code
		if r.TransactionalID == nil { // an idempotent producer's: Kafka's answer is the cluster's
			forbidden = kerr.ClusterAuthorizationFailed.Code
		}
		resp.ErrorCode = codeOf(err, forbidden)
		if resp.ErrorCode == kerr.NotLeaderForPartition.Code {
			resp.ErrorCode = kerr.NotCoordinator.Code
		}
		return resp
	}
	if out.ErrorCode != 0 {
		resp.ErrorCode = int16(out.ErrorCode)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = out.ProducerId, int16(out.ProducerEpoch)
	if r.TransactionalID != nil { // a clean start: whatever an older epoch staged is gone
		key := txnKey{tenant.From(ctx), in.TransactionalId}
		term := t.s.node.StatusOf(ctx).Term
		t.mu.Lock()
		if old := t.txns[key]; old != nil {
			t.drop(old)
		}
		t.txns[key] = &txnState{tenant: key.tenant, id: key.id, producer: out.ProducerId, epoch: int16(out.ProducerEpoch),
			term: term, timeout: time.Duration(in.TxnTimeoutMs) * time.Millisecond}
		t.report()
		t.mu.Unlock()
	}
	return resp
}

func (t *txnCoordinator) addPartitions(ctx context.Context, r *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	t.mu.Lock()
	st, code := t.state(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if code == 0 {
		st.stagedHere = true
	}
	t.mu.Unlock()
	var known map[txnPartition]bool
	if code == 0 {
		known = t.knownPartitions(ctx, r)
	}
	for _, topic := range r.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = topic.Topic
		for _, p := range topic.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			switch {
			case code != 0:
				rp.ErrorCode = code
			case !visible(ctx, topic.Topic):
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known[txnPartition{topic.Topic, p}]:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (t *txnCoordinator) knownPartitions(ctx context.Context, r *kmsg.AddPartitionsToTxnRequest) map[txnPartition]bool {
	known := map[txnPartition]bool{}
	_ = t.s.node.Read(ctx, cluster.Stale, func(rd *fsm.Reader) error {
		for _, topic := range r.Topics {
			for _, p := range topic.Partitions {
				if _, ok := topicPartition(rd, topic.Topic, p); ok {
					known[txnPartition{topic.Topic, p}] = true
				}
			}
		}
		return nil
	})
	return known
}

func (t *txnCoordinator) addOffsets(ctx context.Context, r *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if why := validGroup(r.Group); why != "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, code := t.state(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if code == 0 {
		st.stagedHere = true
	}
	if code == 0 && st.doomed == "" {
		if st.groups == nil {
			st.groups = map[string]bool{}
		}
		st.groups[r.Group] = true
	}
	resp.ErrorCode = code
	return resp
}

// stage holds a transactional batch until its transaction ends.
func (t *txnCoordinator) stage(ctx context.Context, id *string, b ProducedBatch, topic string, partition int32) int16 {
	if id == nil || *id == "" {
		return kerr.InvalidTxnState.Code
	}
	kb := kafkaBatch(topic, partition, b)
	// the same authorisation the commit entry will pass, checked now
	if err := t.s.pipe.Authorize(ctx, &command.Command{Body: &command.Command_KafkaProduce{KafkaProduce: &command.KafkaProduce{
		Batches: []*command.KafkaBatch{kb}}}}); err != nil {
		return codeOf(err, kerr.TopicAuthorizationFailed.Code)
	}
	size := 0
	for _, it := range kb.Items {
		size += len(it.Payload) + len(it.TransactionId) + 64
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, code := t.state(ctx, *id, b.ProducerID, b.ProducerEpoch)
	if code != 0 {
		return code
	}
	st.stagedHere = true
	tp := txnPartition{topic, partition}
	if st.seen[tp][b.BaseSequence] {
		return 0 // a retried produce: staged already
	}
	switch {
	case st.doomed != "":
		return 0 // answered at EndTxn: nothing of it will commit
	case st.records+len(kb.Items) > t.s.cfg.Limits.TxnMaxRecords || st.bytes+size > t.s.cfg.Limits.TxnMaxBytes:
		return kerr.MessageTooLarge.Code // one transaction must stay below the log's largest entry
	case t.staged+size > t.s.cfg.Limits.OpenTxnMaxBytes:
		return kerr.PolicyViolation.Code
	}
	if st.seen == nil {
		st.seen = map[txnPartition]map[int32]bool{}
	}
	if st.seen[tp] == nil {
		st.seen[tp] = map[int32]bool{}
	}
	st.seen[tp][b.BaseSequence] = true
	for _, it := range kb.Items {
		st.pushes = append(st.pushes, &command.TxnOp{Op: &command.TxnOp_Push{Push: it}})
	}
	st.records += len(kb.Items)
	st.bytes += size
	t.staged += size
	t.report()
	return 0
}

func (t *txnCoordinator) offsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var items []commitItem
	for _, topic := range r.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = topic.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(topic.Partitions))
		resp.Topics = append(resp.Topics, rt)
	}
	groupCode := int16(0)
	if validGroup(r.Group) != "" {
		groupCode = kerr.InvalidGroupID.Code
	} else if r.Generation >= 0 {
		groupCode = t.s.groups.checkGeneration(ctx, r.Group, r.MemberID, r.Generation)
	}
	for ti, topic := range r.Topics {
		for pi, p := range topic.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			rp.Partition, rp.ErrorCode = p.Partition, groupCode
			items = append(items, commitItem{code: &rp.ErrorCode, op: positionOp(r.Group, topic.Topic, p.Partition, p.Offset, p.Metadata)})
		}
	}
	t.s.checkPartitions(ctx, items)
	t.mu.Lock()
	defer t.mu.Unlock()
	st, code := t.state(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if code == 0 {
		st.stagedHere = true
	}
	for _, it := range items {
		switch {
		case *it.code != 0:
		case code != 0:
			*it.code = code
		case st.doomed == "":
			if st.offsets == nil {
				st.offsets = map[string]map[txnPartition]*command.PositionOp{}
			}
			if st.offsets[r.Group] == nil {
				st.offsets[r.Group] = map[txnPartition]*command.PositionOp{}
			}
			n, _ := strconv.Atoi(it.op.Partition)
			st.offsets[r.Group][txnPartition{it.op.Queue, int32(n)}] = it.op
		}
	}
	return resp
}

func (t *txnCoordinator) endTxn(ctx context.Context, r *kmsg.EndTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	t.mu.Lock()
	st, code := t.state(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if code != 0 {
		t.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	pushes, positions, doomed, term, stagedHere := st.pushes, st.positions(), st.doomed, st.term, st.stagedHere
	if r.Commit && doomed == "" {
		st.committing = st.offsets
	}
	t.release(st)
	st.open, st.doomed, st.stagedHere = false, "", false // whatever the answer, the next transaction starts clean here
	t.report()
	t.mu.Unlock()
	if !r.Commit {
		return resp // nothing staged was ever in the log
	}
	if doomed != "" && !stagedHere {
		// Nothing of this transaction reached this coordinator but its
		// EndTxn: it may be the retry of one the old coordinator appended
		// before it failed, and that entry may have committed. An answer
		// the client recovers from (TRANSACTION_ABORTABLE) would make it
		// rewind to the offsets it last saw committed and replay what may
		// be in the output already (franz-go's GroupTransactSession does).
		t.s.log.Warn("kafka: a transaction's commit may have been written by its former coordinator: the producer is fenced and must start again from the committed offsets",
			"tenant", st.tenant, "transactional_id", r.TransactionalID, "why", doomed)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp
	}
	if doomed != "" {
		t.s.log.Warn("kafka: a transaction's commit refused: abort it and retry", "tenant", st.tenant, "transactional_id", r.TransactionalID, "why", doomed)
		resp.ErrorCode = kerr.TransactionAbortable.Code
		return resp
	}
	// CoordinatorTerm: the commit applies only from an entry this leader
	// appends in the term it staged the transaction in. Forwarded to a
	// later leader, it would land after that leader answered OffsetFetch
	// without knowing these offsets were pending (pendingOffsets is this
	// node's), and a consumer of the rebalanced group would replay them.
	guard := &command.KafkaTxnGuard{ProducerId: r.ProducerID, ProducerEpoch: int32(r.ProducerEpoch), TransactionalId: r.TransactionalID,
		ProducerIdleUs: t.s.cfg.Limits.ProducerIdle.Microseconds(), CoordinatorTerm: term}
	var items []commitItem
	for _, p := range positions {
		code := int16(0)
		items = append(items, commitItem{code: &code, op: p})
	}
	code = t.s.commitPositions(ctx, items, guard, pushes)
	switch code {
	case kerr.RequestTimedOut.Code:
		// The entry may yet commit. Its offsets stay pending until its
		// fate is settled, and the producer is fenced: the answers it
		// would recover from (abortable, unknown) make franz-go rewind to
		// the offsets it last saw committed, which replays the inputs if
		// the entry did commit. A new producer reads the committed
		// offsets, after its InitProducerId entry, when the fate is known.
		t.s.log.Warn("kafka: a transaction's commit has an unknown outcome: the producer is fenced and must start again from the committed offsets",
			"tenant", st.tenant, "transactional_id", r.TransactionalID)
		go t.settle(st.tenant, st)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp
	case kerr.NotLeaderForPartition.Code:
		// refused before it entered any log (cluster.ErrNotLeader), or
		// by the guard on a later leader: nothing committed
		resp.ErrorCode = kerr.TransactionAbortable.Code
	default:
		resp.ErrorCode = code
	}
	t.mu.Lock()
	st.committing = nil
	t.mu.Unlock()
	return resp
}

// settle keeps the offsets of a commit entry with an unknown outcome
// pending (RequireStable's UNSTABLE_OFFSET_COMMIT) until this leader's log
// is settled, or it no longer leads the tenant's group (a new leader
// settles the log before it answers OffsetFetch).
func (t *txnCoordinator) settle(name string, st *txnState) {
	ctx := tenantCtx(name)
	for t.s.leads(ctx) {
		if err := t.s.node.Settle(ctx); err == nil {
			break
		}
		select {
		case <-t.s.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.mu.Lock()
	st.committing = nil
	t.mu.Unlock()
}

// positions are the offsets staged, in a fixed order.
func (st *txnState) positions() []*command.PositionOp {
	var out []*command.PositionOp
	for _, byTP := range st.offsets {
		for _, op := range byTP {
			out = append(out, op)
		}
	}
	sortPositions(out)
	return out
}

// pendingOffsets reports whether an open transaction of the tenant ctx
// carries has staged an offset of the group for that partition
// (OffsetFetch's RequireStable).
func (t *txnCoordinator) pendingOffsets(ctx context.Context, group, topic string, partition int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	name := tenant.From(ctx)
	for key, st := range t.txns {
		if key.tenant != name {
			continue
		}
		tp := txnPartition{topic, partition}
		if _, ok := st.offsets[group][tp]; ok && st.doomed == "" {
			return true
		}
		if _, ok := st.committing[group][tp]; ok {
			return true
		}
	}
	return false
}
