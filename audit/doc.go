// Package audit is the trail of admin and destructive actions (issue 14):
// queue and group deletion, seeks, subscription changes, maintenance and
// the operator switches, voter removal, restores, dead-letter replays and
// purges, and message deletions. Each is recorded by apply, in the same
// entry as the action, with the entry's time and the command's actor (the
// token's sub), so every replica holds the same trail and a crash cannot
// separate an action from its record; an action that changed nothing (a
// replay of a record that is gone, a deletion of no message) leaves no
// record. The newest MaxRecords are kept.
package audit
