// Package backup is the file format of a queen-node backup and the
// client side of taking and restoring one.
//
// A backup is a Raft snapshot of a running cluster (the FSM's snapshot: the
// state image plus the live message files) with what a restore needs to
// trust it:
//
//	"QNBACKUP"                8 bytes, magic
//	header length             uint32, big endian
//	header                    JSON: format version, log and state formats,
//	                          the snapshot's Raft index and term, its size,
//	                          when and where it was taken
//	snapshot                  header.size bytes
//	sha256                    32 bytes, of everything before it
//
// Open refuses a file that is not a backup, of a format this code does not
// read, truncated, or whose checksum does not match, each with an error
// that says which. The server side (GET /api/v1/system/backup, POST
// /api/v1/system/restore) is in httpapi and cluster; Download and Upload
// are what `queen-node backup` and `queen-node restore` run.
package backup
