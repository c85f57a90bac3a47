package grpcapi

import (
	"google.golang.org/grpc"

	"github.com/queen-node/queen-node/grpcapi/internalpb"
)

// NewServer builds the node's gRPC server with the internal forwarding
// service registered.
func NewServer(node Leader) *grpc.Server {
	s := grpc.NewServer(grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20))
	internalpb.RegisterForwardServer(s, NewForwardServer(node))
	return s
}
