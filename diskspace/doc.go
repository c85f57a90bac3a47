// Package diskspace watches the free space of the filesystem that holds a
// node's data dir, so that a nearly full disk is met with a refusal at the
// door instead of a failed commit in the middle of apply (addendum §4.9).
//
// Two thresholds: below MinFree a node refuses writes that add data (507
// storage_full); below MinFree/2 its FSM stops applying and waits, entry
// for entry where it stopped, until space comes back. The Raft log keeps
// what the leader sends as long as it can; the rest is resent.
package diskspace
