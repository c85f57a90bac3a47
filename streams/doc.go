// Package streams keeps the state of Queen's stream runtimes in the broker
// (spec §4.16): registered queries, and each query's state rows (key →
// JSON value) per source partition. It runs inside fsm.Apply on the
// command's staged transaction: a cycle's state operations commit in the
// same log entry as its pushes to the sink and the ack of the messages it
// consumed (fsm/streams.go), or not at all, so a crash between them cannot
// count a window twice or lose one.
//
// A query's rows live under its state generation (state_id): a reset or a
// deletion starts a new generation (or none) in one small entry, and the
// old generation's rows are removed by sweep steps (Sweep), never by one
// entry of unbounded size. Rows are replicated state: in snapshots,
// backups and the state hash; retention of the source queue never touches
// them.
//
// Who may commit: a cycle with an ack is fenced by the caller's lease on
// the source partition (package queue). A cycle without one (a runtime's
// idle flush) has no lease to be fenced by, so two rules stand in for it
// (see DESIGN.md): it commits only while no live lease of its consumer
// group holds the partition (a worker in the middle of a cycle), and each
// of its deletes must find the row it names (a flush deletes only rows it
// read; a missing one means another flusher emitted that window first).
package streams
