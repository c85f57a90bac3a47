package raftlog

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openStores(t *testing.T) *Stores {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := Open(Config{Dir: t.TempDir(), BindAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A quarantined transport answers votes, pre-votes and leadership
// transfers itself with a refusal, over the real TCP transport, while
// every other RPC reaches Raft; lifted, votes reach Raft again.
func TestAQuarantinedTransportRefusesVotesAndCandidacy(t *testing.T) {
	q, peer := openStores(t), openStores(t)
	var on atomic.Bool
	on.Store(true)
	q.Transport.Quarantine(on.Load)
	target := q.Transport.LocalAddr()
	raftSide := q.Transport.Consumer()
	serve := func(want string) { // what Raft would answer, had the RPC reached it
		select {
		case rpc := <-raftSide:
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Term: 9, Granted: true}, nil)
			case *raft.AppendEntriesRequest:
				rpc.Respond(&raft.AppendEntriesResponse{Term: 9, Success: true}, nil)
			default:
				t.Errorf("Raft got %T, want %s", rpc.Command, want)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Raft got no %s", want)
		}
	}

	var vote raft.RequestVoteResponse
	if err := peer.Transport.RequestVote("q", target, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("p"), Addr: []byte("p")}, Term: 9}, &vote); err != nil || vote.Granted {
		t.Fatalf("vote to a quarantined node: %+v %v, want refused", vote, err)
	}
	var pre raft.RequestPreVoteResponse
	if err := peer.Transport.RequestPreVote("q", target, &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("p")}, Term: 9}, &pre); err != nil || pre.Granted {
		t.Fatalf("pre-vote to a quarantined node: %+v %v, want refused", pre, err)
	}
	var tn raft.TimeoutNowResponse
	if err := peer.Transport.TimeoutNow("q", target, &raft.TimeoutNowRequest{}, &tn); err == nil {
		t.Fatal("a leadership transfer to a quarantined node was accepted")
	}
	go serve("AppendEntries")
	var ae raft.AppendEntriesResponse
	if err := peer.Transport.AppendEntries("q", target, &raft.AppendEntriesRequest{Term: 9}, &ae); err != nil || !ae.Success {
		t.Fatalf("replication to a quarantined node: %+v %v, want it to reach Raft", ae, err)
	}

	on.Store(false)
	go serve("RequestVote")
	if err := peer.Transport.RequestVote("q", target, &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("p"), Addr: []byte("p")}, Term: 9}, &vote); err != nil || !vote.Granted {
		t.Fatalf("vote after the quarantine: %+v %v, want Raft's answer", vote, err)
	}
}
