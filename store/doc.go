// Package store is the FSM's on-disk state: one bbolt file of flat buckets
// with composite keys. It adds two things bbolt lacks.
//
//   - Staged writes: every command applies into a Tx whose writes are held
//     in memory until Commit, and whose reads (Get and cursors) see the
//     command's own writes merged over the file. Discard drops them, so a
//     transaction that fails a precondition half way leaves nothing behind
//     (DESIGN.md invariant 3), whatever order its checks ran in.
//   - An atomic swap: Restore replaces the whole file under an exclusive
//     lock, so a reader sees the old state or the new one, never a mix.
package store
