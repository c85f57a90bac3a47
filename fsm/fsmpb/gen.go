package fsmpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative records.proto commands.proto results.proto
