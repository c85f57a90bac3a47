// Package locks is the domain of POST /api/v1/locks (addendum §4.3): locks
// and semaphores with fencing tokens, decided in apply, by the entry's time.
//
// A permit is one KV row and nothing else: namespace Namespace
// ("queen-locks"), key "<name>#<slot>", the holder's owner as its value
// ({"owner": ...}), the lock's lifetime as its TTL. The row's version (the
// index of the entry that wrote it) is the permit's fencing token, and a
// guard is the KV check op of that row at that version, so a transaction
// that carries it commits only while the permit is still the caller's: the
// check runs through the ordinary KV machinery (kvstore) in the same entry
// as the transaction's writes.
//
// A lock is a semaphore of one permit (slot 0); a semaphore of N has the
// slots 0..N-1. The limit is the caller's and is stored nowhere.
//
// Why apply decides, and not the node that received the call (Queen turns
// each op into KV calls on that node: a read, then a putIfAbsent that may
// lose to a racer, retried a few times before it answers "contended"): one
// call is one entry here (DESIGN.md invariant 1), and only apply can look
// at a lock's slots and take one in the same step. Apply scans the slots
// at the entry's time, so an expired permit is free at exactly its expiry
// on every replica, two acquires can never pick the same slot, and no
// acquire ever needs "contended". The ops of one call are independent (not
// all or nothing): each names a different lock, so none can see another's
// writes.
//
// The owner makes a retry safe: an acquire by an owner that holds a live
// permit of the lock answers that permit (already, same token); a renew
// whose token is stale, of a permit this owner holds, is carried through
// (its own earlier renew landed and only the answer was lost). Two callers
// with one owner are one holder, by definition.
package locks
