// Package internalpb is the node-to-node forwarding service (generated; run
// `go generate ./grpcapi/internalpb` after editing forward.proto).
package internalpb

//go:generate protoc --proto_path=../.. --go_out=../.. --go_opt=paths=source_relative --go-grpc_out=../.. --go-grpc_opt=paths=source_relative grpcapi/internalpb/forward.proto
