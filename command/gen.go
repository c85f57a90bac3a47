package command

//go:generate protoc --proto_path=.. --go_out=.. --go_opt=paths=source_relative command/records.proto command/commands.proto command/results.proto command/queries.proto command/streams.proto command/kafka.proto command/placement.proto
