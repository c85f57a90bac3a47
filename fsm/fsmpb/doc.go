// Package fsmpb holds the protobuf types of the replicated log: the Command
// carried by every entry, the results fsm.Apply returns, and the records the
// FSM stores. The generated code is committed, so a build needs no protoc;
// run `go generate ./fsm/fsmpb` after editing a .proto file.
package fsmpb
