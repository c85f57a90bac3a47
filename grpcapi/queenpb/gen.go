// Package queenpb is queen-node's public gRPC API, package queen.v1
// (generated; run `go generate ./grpcapi/queenpb` after editing queen.proto).
// Its types are the wire contract only: grpcapi converts them to the
// state machine's commands in one place, and nothing else depends on them.
package queenpb

//go:generate protoc --proto_path=../.. --go_out=../.. --go_opt=paths=source_relative --go-grpc_out=../.. --go-grpc_opt=paths=source_relative grpcapi/queenpb/queen.proto
