// Package damage keeps what a node found damaged in its own files: the
// message files (a record or index entry whose CRC-32C fails), the Raft log
// (an entry whose checksum fails) or the state file. Damage is found where
// bytes are read, in the package that reads them; it is reported here, once
// per finding, and the node's status, /health and /metrics read it from
// here. A damaged node never serves the damaged bytes: the read is an
// error, and apply stops before it could diverge from the other replicas
// (see fsm/DESIGN.md, damaged files).
package damage
