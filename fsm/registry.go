package fsm

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
)

// The registry: one register call per kind of command, each naming every
// fact of its kind (kinds.go). Adding a command is:
//
//  1. its message in command/commands.proto, with an arm in Command's body
//     oneof, and its result message in command/results.proto, with an arm
//     in Response's result oneof (command.Wrap and Unwrap find results
//     there; nothing else switches on result types);
//  2. one register call below, with its handler, in the file of its domain,
//     and its tests;
//  3. where it is a client's, its route in the access table (package
//     pipeline) and its request rules (package request).
//
// TestEveryCommandBodyHasAKind fails until steps 1 and 2 agree.
func init() {
	register(&command.Command_Noop{}, Kind{Name: "noop", Origin: FromNode, WhenFull: AdmittedWhenFull,
		Apply: func(*applyCtx, *command.Command) (proto.Message, bool) { return &command.Response{}, true },
		Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	// a point where every replica digests its state file (statecheck.go);
	// skippable, so that a node of an older log format passes over it
	register(&command.Command_StateCheck{}, Kind{Name: "state_check", Origin: FromNode, WhenFull: AdmittedWhenFull,
		Apply: func(*applyCtx, *command.Command) (proto.Message, bool) { return &command.Response{}, true },
		Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Push{}, Kind{Name: "push", Apply: applyPush, Origin: FromClient,
		Access: func(*command.Command) Access { return Access{Level: auth.ReadWrite, Producer: true} },
		Touches: func(cmd *command.Command, touch func(Touch)) {
			for _, it := range cmd.GetPush().Items {
				touch(Queue(it.Queue))
			}
		},
		WhenFull: RefusedWhenFull, Audit: notAudited, Refusal: neverRefused,
		Payloads: func(cmd *command.Command, push func(*command.PushItem), _ func(*command.TimerOp)) {
			for _, it := range cmd.GetPush().Items {
				push(it)
			}
		}})

	register(&command.Command_Pop{}, Kind{Name: "pop", Apply: applyPop, Origin: FromClient, Access: readWrite,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			if q := cmd.GetPop().Queue; q != "" {
				touch(Queue(q))
			} else {
				touch(EveryQueue()) // a namespace pop
			}
		},
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Ack{}, Kind{Name: "ack", Apply: applyAck, Origin: FromClient, Access: readWrite,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			for _, it := range cmd.GetAck().Items {
				touch(Partition(it.PartitionId))
			}
		},
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Transaction{}, Kind{Name: "transaction", Apply: applyTransaction, Origin: FromClient,
		Access: readWrite, Touches: transactionTouches, WhenFull: RefusedWhenFull, Audit: notAudited,
		Payloads: transactionPayloads, Refusal: transactionRefusal})

	register(&command.Command_ExtendLease{}, Kind{Name: "extend_lease", Apply: applyExtendLease, Origin: FromClient,
		Access:   readWrite,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Lease(cmd.GetExtendLease().LeaseId)) },
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Configure{}, Kind{Name: "configure", Apply: applyConfigure, Origin: FromClient,
		Access:   readWrite,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Queue(cmd.GetConfigure().Queue)) },
		WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_DeleteQueue{}, Kind{Name: "delete_queue", Apply: applyDeleteQueue, Origin: FromClient,
		Access:   admin,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Queue(cmd.GetDeleteQueue().Queue)) },
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			return "delete_queue", fmt.Sprintf("queue=%q", cmd.GetDeleteQueue().Queue)
		}})

	register(&command.Command_Sweep{}, Kind{Name: "sweep", Apply: applySweep, Origin: FromNode,
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_IndexDeadLetters{}, Kind{Name: "index_dead_letters", Apply: applyIndexDeadLetters,
		Origin: FromNode, WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_StreamRegister{}, Kind{Name: "stream_register", Apply: applyStreamRegister,
		Origin: FromClient, Access: readWrite,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			r := cmd.GetStreamRegister()
			touch(Queue(r.SourceQueue))
			if r.SinkQueue != "" {
				touch(Queue(r.SinkQueue))
			}
		},
		WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: streamRegisterRefusal})

	register(&command.Command_KafkaInitProducer{}, Kind{Name: "kafka_init_producer", Apply: applyKafkaInitProducer,
		Origin: FromClient, Access: func(*command.Command) Access { return Access{Level: auth.ReadWrite, Producer: true} },
		Touches:  func(*command.Command, func(Touch)) {}, // an id names no queue
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_KafkaProduce{}, Kind{Name: "kafka_produce", Apply: applyKafkaProduce, Origin: FromClient,
		Access:  func(*command.Command) Access { return Access{Level: auth.ReadWrite, Producer: true} },
		Touches: kafkaProduceTouches, WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: kafkaProducePayloads,
		Refusal: neverRefused})

	register(&command.Command_PlaceTenant{}, Kind{Name: "place_tenant", Apply: applyPlaceTenant, Origin: FromClient,
		Access:   operator,                               // the table spans every tenant
		Touches:  func(*command.Command, func(Touch)) {}, // a tenant's row, no queue
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			if p := cmd.GetPlaceTenant(); p.Pin {
				return "pin_tenant", fmt.Sprintf("tenant=%q group=%d", p.Tenant, p.Group)
			}
			return "", ""
		}})

	register(&command.Command_KafkaCreateTopics{}, Kind{Name: "kafka_create_topics", Apply: applyKafkaCreateTopics,
		Origin: FromClient, Access: readWrite,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			for _, t := range cmd.GetKafkaCreateTopics().Topics {
				touch(Queue(t.Name))
			}
		},
		WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_StreamCycle{}, Kind{Name: "stream_cycle", Apply: applyStreamCycle, Origin: FromClient,
		Access: readWrite, Touches: streamCycleTouches, WhenFull: RefusedWhenFull, Audit: notAudited,
		Payloads: streamCyclePayloads, Refusal: neverRefused})

	register(&command.Command_StreamDeleteQuery{}, Kind{Name: "stream_delete_query", Apply: applyStreamDeleteQuery,
		Origin: FromClient, Access: admin,
		Touches:  func(_ *command.Command, touch func(Touch)) { touch(EveryQueue()) }, // an operator's, by name
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: streamDeleteRefusal,
		Audit: func(cmd *command.Command) (string, string) {
			return "stream_delete_query", "name=" + strconv.Quote(cmd.GetStreamDeleteQuery().Name)
		}})

	register(&command.Command_Retain{}, Kind{Name: "retain", Apply: applyRetain, Origin: FromNode,
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Kv{}, Kind{Name: "kv", Apply: applyKV, Origin: FromClient,
		Access: readWrite, // a KV call of reads only is a query, never a command
		Touches: func(cmd *command.Command, touch func(Touch)) {
			for _, op := range cmd.GetKv().Ops {
				touch(Namespace(op.Ns))
			}
		},
		WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: noPayloads,
		Refusal: func(rd *Reader, cmd *command.Command) proto.Message { return kvSwitchedOff(rd.Meta()) }})

	register(&command.Command_IdempotencyRecord{}, Kind{Name: "idempotency_record", Apply: applyIdempotencyRecord,
		Origin: FromNode, WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_SetSwitches{}, Kind{Name: "set_switches", Apply: applySetSwitches, Origin: FromClient,
		Access:   operator,                                                            // the switches are the log's, every tenant's
		Touches:  func(_ *command.Command, touch func(Touch)) { touch(EveryQueue()) }, // they span every queue
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused, Audit: switchesAudit})

	register(&command.Command_Timers{}, Kind{Name: "timers", Apply: applyTimerBatch, Origin: FromClient,
		Access: timersAccess,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			for _, op := range cmd.GetTimers().Ops {
				touch(Queue(op.Queue))
			}
		},
		WhenFull: RefusedWhenFull, Audit: notAudited,
		Payloads: func(cmd *command.Command, _ func(*command.PushItem), timer func(*command.TimerOp)) {
			eachSchedule(cmd.GetTimers().Ops, timer)
		},
		Refusal: func(rd *Reader, cmd *command.Command) proto.Message { return timersSwitchedOff(rd.Meta(), cmd) }})

	register(&command.Command_FireTimers{}, Kind{Name: "fire_timers", Apply: applyFireTimers, Origin: FromNode,
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_DrainBuffer{}, Kind{Name: "drain_buffer", Apply: applyDrainBuffer, Origin: FromNode,
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_DeleteGroup{}, Kind{Name: "delete_group", Apply: applyDeleteGroup, Origin: FromClient,
		Access: admin,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			if q := cmd.GetDeleteGroup().Queue; q != "" {
				touch(Queue(q))
			} else {
				touch(EveryQueue())
			}
		},
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			g := cmd.GetDeleteGroup()
			return "delete_consumer_group", fmt.Sprintf("group=%q queue=%q deleteMetadata=%t", g.Group, g.Queue, g.DeleteMetadata)
		}})

	register(&command.Command_SetSubscription{}, Kind{Name: "set_subscription", Apply: applySetSubscription,
		Origin: FromClient, Access: readWrite,
		Touches:  func(_ *command.Command, touch func(Touch)) { touch(EveryQueue()) }, // the group in every queue
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			s := cmd.GetSetSubscription()
			return "set_subscription", fmt.Sprintf("group=%q fromUs=%d", s.Group, s.FromUs)
		}})

	register(&command.Command_Seek{}, Kind{Name: "seek", Apply: applySeek, Origin: FromClient, Access: readWrite,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Queue(cmd.GetSeek().Queue)) },
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: seekRefusal,
		Audit: func(cmd *command.Command) (string, string) {
			s := cmd.GetSeek()
			if s.OnePartition {
				return "seek", fmt.Sprintf("group=%q queue=%q partition=%q toEnd=true", s.Group, s.Queue, s.Partition)
			}
			return "seek", fmt.Sprintf("group=%q queue=%q toEnd=%t timestampUs=%d", s.Group, s.Queue, s.ToEnd, s.TimestampUs)
		}})

	register(&command.Command_AuditNote{}, Kind{Name: "audit_note", Origin: FromNode, WhenFull: AdmittedWhenFull,
		// its record is written by applyCommand, like every audited command's
		Apply: func(*applyCtx, *command.Command) (proto.Message, bool) { return &command.Response{}, true },
		Audit: func(cmd *command.Command) (string, string) {
			return cmd.GetAuditNote().Action, cmd.GetAuditNote().Detail
		},
		Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_DeleteMessage{}, Kind{Name: "delete_message", Apply: applyDeleteMessage,
		Origin: FromClient, Access: readWrite,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Partition(cmd.GetDeleteMessage().PartitionId)) },
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			d := cmd.GetDeleteMessage()
			return "delete_message", fmt.Sprintf("partitionId=%x seq=%d transactionId=%q", d.PartitionId, d.Seq, d.TransactionId)
		}})

	register(&command.Command_ReplayDeadLetter{}, Kind{Name: "replay_dead_letter", Apply: applyReplayDeadLetter,
		Origin: FromClient, Access: readWrite,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			r := cmd.GetReplayDeadLetter()
			touch(Queue(r.SourceQueue)) // the record's queue as the front end read it; apply checks it
			if r.Queue != "" {
				touch(Queue(r.Queue))
			}
		},
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused, Audit: replayAudit})

	register(&command.Command_PurgeDeadLetters{}, Kind{Name: "purge_dead_letters", Apply: applyPurgeDeadLetters,
		Origin: FromClient, Access: admin,
		Touches: func(cmd *command.Command, touch func(Touch)) {
			if q := cmd.GetPurgeDeadLetters().Queue; q != "" {
				touch(Queue(q))
			} else {
				touch(EveryQueue())
			}
		},
		WhenFull: AdmittedWhenFull, Payloads: noPayloads, Refusal: neverRefused,
		Audit: func(cmd *command.Command) (string, string) {
			p := cmd.GetPurgeDeadLetters()
			return "dlq_purge", fmt.Sprintf("queue=%q group=%q", p.Queue, p.ConsumerGroup)
		}})

	register(&command.Command_RecordTrace{}, Kind{Name: "record_trace", Apply: applyRecordTrace,
		Origin: FromClient, Access: readWrite,
		Touches:  func(cmd *command.Command, touch func(Touch)) { touch(Partition(cmd.GetRecordTrace().PartitionId)) },
		WhenFull: AdmittedWhenFull, Audit: notAudited, Payloads: noPayloads, Refusal: neverRefused})

	register(&command.Command_Locks{}, Kind{Name: "locks", Apply: applyLocks, Origin: FromClient, Access: readWrite,
		// permits are KV rows of that namespace, as the guard's check is
		Touches:  func(_ *command.Command, touch func(Touch)) { touch(Namespace(locks.Namespace)) },
		WhenFull: RefusedWhenFull, Audit: notAudited, Payloads: noPayloads,
		Refusal: func(rd *Reader, cmd *command.Command) proto.Message { return locksSwitchedOff(rd.Meta()) }})
}
