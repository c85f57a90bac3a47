package fsmpb

//go:generate protoc --proto_path=../.. --go_out=../.. --go_opt=paths=source_relative fsm/fsmpb/records.proto fsm/fsmpb/commands.proto fsm/fsmpb/results.proto
