// Package traces keeps the trace events of messages (spec §4.15): a
// record per event under its message (partition id, seq), and an index by
// trace name for the by-name and names views. A trace lives exactly as
// long as its message: the queue domain removes a message's traces in the
// entry that removes the message (retention, DELETE of the message, and
// the graveyard sweep of a deleted queue's partitions), so nothing here
// ever expires on its own. Everything is written by apply from values in
// the entry (the trace id is minted by the proposer, the time is the
// entry's), so every replica holds the same records.
package traces
