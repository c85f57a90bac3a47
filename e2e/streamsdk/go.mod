module github.com/queen-node/queen-node/e2e/streamsdk

go 1.26

require github.com/smartpricing/queen/clients/client-go v0.0.0

require github.com/google/uuid v1.6.0 // indirect

replace github.com/smartpricing/queen/clients/client-go => ../../third_party/queen-client-go
