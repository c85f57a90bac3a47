// Package timers holds scheduled messages (addendum §1): a timer is a
// record keyed by (queue, timerKey) plus an index ordered by the time it is
// due. The due time is the entry's time plus the delay, computed in apply
// from the leader's stamp. The leader proposes fire steps; apply fires
// every timer due by the fire entry's own time, earliest first, each
// through the queue domain's ordinary push path (dedup by txn), and deletes
// the timer in the same entry, so a fired message and its pending timer
// never coexist. A refused fire backs off; the fifth refusal files a dead
// letter under the group __timer__.
package timers
