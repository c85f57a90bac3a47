package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"
)

// What each node says about itself, for the cluster object of /status and
// /analytics/system-metrics. Raft tells a node its own applied index, not
// its followers', so the node serving the request asks every other node's
// public /health (and /metrics) at the HTTP address it advertised in
// gossip, all at once, with a short timeout: a node that does not answer
// is shown as unreachable. Every node thus shows every node's own figures,
// whichever node serves the page.

// peerTimeout bounds one probe of another node.
const peerTimeout = 1500 * time.Millisecond

// nodeStatus is one node as /status shows it.
type nodeStatus struct {
	ID        string `json:"id"`
	HTTPAddr  string `json:"httpAddr"`
	Voter     bool   `json:"voter"`
	Alive     bool   `json:"alive"`     // gossip sees it
	Reachable bool   `json:"reachable"` // it answered the probe
	Self      bool   `json:"self"`      // the node serving this answer
	Role      string `json:"role"`
	LeaderID  string `json:"leaderId"`
	Term      uint64 `json:"term"`
	Applied   uint64 `json:"applied"`
	Commit    uint64 `json:"commit"`
	Lag       uint64 `json:"lag"` // commit - applied on that node
	// Behind is how far its applied index is behind the highest applied
	// index any node reported in this answer.
	Behind       uint64 `json:"behind"`
	StorageReady bool   `json:"storageReady"`
	Status       string `json:"status"`           // its /health status: healthy, settling, damaged
	Damage       string `json:"damage,omitempty"` // what it found damaged, when it did
	Resync       string `json:"resync,omitempty"` // the phase of its rebuild from the leader, while it runs
	Error        string `json:"error,omitempty"`
	// from /metrics (system-metrics only)
	Uptime     float64 `json:"-"`
	HeapBytes  uint64  `json:"-"`
	Goroutines int     `json:"-"`
	Requests   uint64  `json:"-"`
	InFlight   int     `json:"-"`
	DiskFree   uint64  `json:"-"`
}

// healthBody is the part of another node's /health a probe reads.
type healthBody struct {
	Status string `json:"status"`
	NodeID string `json:"nodeId"`
	Raft   struct {
		Role         string `json:"role"`
		LeaderID     string `json:"leaderId"`
		Term         uint64 `json:"term"`
		Applied      uint64 `json:"applied"`
		Commit       uint64 `json:"commit"`
		Lag          uint64 `json:"lag"`
		StorageReady bool   `json:"storageReady"`
		Damage       *struct {
			Where  string `json:"where"`
			Reason string `json:"reason"`
		} `json:"damage"`
		Resync *struct {
			Phase string `json:"phase"`
		} `json:"resync"`
	} `json:"raft"`
	Load struct {
		InFlight      int    `json:"inFlight"`
		DiskFreeBytes uint64 `json:"diskFreeBytes"`
	} `json:"load"`
}

type metricsBody struct {
	Uptime   float64 `json:"uptime"`
	Requests struct {
		Total uint64 `json:"total"`
	} `json:"requests"`
	Memory struct {
		HeapAlloc  uint64 `json:"heapAlloc"`
		Goroutines int    `json:"goroutines"`
	} `json:"memory"`
}

func (a *API) peerClient() *http.Client {
	a.peerOnce.Do(func() {
		tr := &http.Transport{Proxy: nil, TLSClientConfig: a.cfg.PeerTLS, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}
		a.peerHC = &http.Client{Transport: tr, Timeout: peerTimeout}
	})
	return a.peerHC
}

func (a *API) peerGet(ctx context.Context, addr, path string, out any) error {
	scheme := "http://"
	if a.cfg.PeerTLS != nil {
		scheme = "https://"
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.peerClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out) // /health answers 503 with the same body
}

// probeNodes asks every node of the cluster view about itself (this node
// answers from its own state).
func (a *API) probeNodes(ctx context.Context, withMetrics bool) []nodeStatus {
	view := a.b.Cluster()
	out := make([]nodeStatus, len(view.Nodes))
	var wg sync.WaitGroup
	for i, nv := range view.Nodes {
		out[i] = nodeStatus{ID: nv.ID, HTTPAddr: nv.HTTPAddr, Voter: nv.Voter, Alive: nv.Alive, Role: nv.State}
		if nv.ID == a.b.ID() {
			a.selfStatus(&out[i])
			continue
		}
		if nv.HTTPAddr == "" {
			out[i].Error = "no HTTP address known (gossip has not seen it)"
			continue
		}
		wg.Add(1)
		go func(ns *nodeStatus) {
			defer wg.Done()
			var h healthBody
			if err := a.peerGet(ctx, ns.HTTPAddr, "/health", &h); err != nil {
				ns.Error, ns.Role = err.Error(), "unreachable"
				return
			}
			if h.NodeID != "" && h.NodeID != ns.ID {
				ns.Error, ns.Role = "another node ("+h.NodeID+") answers at its address", "unreachable"
				return
			}
			ns.Reachable, ns.Status = true, h.Status
			if d := h.Raft.Damage; d != nil {
				ns.Damage = d.Where + ": " + d.Reason
			}
			if r := h.Raft.Resync; r != nil {
				ns.Resync = r.Phase
			}
			ns.Role, ns.LeaderID, ns.Term = h.Raft.Role, h.Raft.LeaderID, h.Raft.Term
			ns.Applied, ns.Commit, ns.Lag, ns.StorageReady = h.Raft.Applied, h.Raft.Commit, h.Raft.Lag, h.Raft.StorageReady
			ns.InFlight, ns.DiskFree = h.Load.InFlight, h.Load.DiskFreeBytes
			if withMetrics {
				var m metricsBody
				if a.peerGet(ctx, ns.HTTPAddr, "/metrics", &m) == nil {
					ns.Uptime, ns.HeapBytes, ns.Goroutines, ns.Requests = m.Uptime, m.Memory.HeapAlloc, m.Memory.Goroutines, m.Requests.Total
				}
			}
		}(&out[i])
	}
	wg.Wait()
	var top uint64
	for _, n := range out {
		top = max(top, n.Applied)
	}
	for i := range out {
		if out[i].Reachable {
			out[i].Behind = top - out[i].Applied
		}
	}
	return out
}

func (a *API) selfStatus(ns *nodeStatus) {
	st := a.b.Status()
	ns.Self, ns.Reachable, ns.Alive = true, true, true
	ns.Role, ns.LeaderID, ns.Term = st.Role, st.LeaderID, st.Term
	ns.Applied, ns.Commit, ns.StorageReady = st.Applied, st.CommitIndex, st.StorageReady
	if st.CommitIndex > st.Applied {
		ns.Lag = st.CommitIndex - st.Applied
	}
	ns.Status = a.healthStatus(st)
	if d := st.Damage; d != nil {
		ns.Damage = d.Where + ": " + d.Reason
	}
	if r := st.Resync; r != nil {
		ns.Resync = r.Phase
	}
	l := a.b.Load()
	ns.InFlight, ns.DiskFree = l.InFlight, l.DiskFreeBytes
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ns.Uptime, ns.HeapBytes, ns.Goroutines = time.Since(a.started).Seconds(), ms.HeapAlloc, runtime.NumGoroutine()
	ns.Requests = a.m.snapshotRequests()
}

// clusterStatus is the cluster object of /status.
func (a *API) clusterStatus(ctx context.Context) map[string]any {
	view := a.b.Cluster()
	nodes := a.probeNodes(ctx, false)
	down := 0
	for _, n := range nodes {
		if !n.Reachable {
			down++
		}
	}
	return map[string]any{"leader": view.Leader, "term": view.Term, "nodes": nodes, "servedBy": a.b.ID(),
		"unreachable": down, "size": len(nodes)}
}
