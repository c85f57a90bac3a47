// Package command is the log's vocabulary: the Command every Raft entry
// carries, the results apply returns for it, the records the state file
// holds, and the status and reason values clients read. It is the only
// package every other package may import, and it imports nothing of ours
// (rqlite's command/ is the model). The front ends build commands from it
// and read results in it; the state machine (fsm) decodes and applies them.
//
// The generated code is committed, so a build needs no protoc; after editing
// a .proto file run `go generate ./command` (protoc 3.21 with
// protoc-gen-go v1.36.12). A change to how an existing field is encoded or
// read is a change of format: bump LogFormat or StateFormat (format.go).
package command
